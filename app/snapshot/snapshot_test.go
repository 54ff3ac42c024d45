package snapshot_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/snapshot"
	"github.com/tollgate/tollgate/app/store"
)

// TestReloadSurvivesListenerLoss: a change is picked up by NOTIFY; after the
// listening connection is killed, the listener reconnects and the next change is
// still picked up without waiting for the (hour-long) poll.
func TestReloadSurvivesListenerLoss(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool := dbtest.Pool(t, dbtest.Schema(t))
	st := store.New(pool)
	src, err := snapshot.New(ctx, st, pool, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go src.Run(ctx)

	team, err := st.CreateTeam(ctx, store.ActorCLI, "acme")
	if err != nil {
		t.Fatal(err)
	}
	addKey := func(email string) string {
		m, err := st.AddMember(ctx, store.ActorCLI, team.ID, email, store.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		k, err := st.IssueKey(ctx, store.ActorCLI, team.ID, m.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		return k.ID
	}
	waitForKey := func(id string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := src.Current().Key(id); ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %s never reached the snapshot", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitForKey(addKey("a@acme.test"))

	// Kill this schema's listener, and only it: other tests run beside this one.
	var killed int
	err = pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'tollgate-listen:' || current_schema()`).Scan(&killed)
	if err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("found no listening connection to kill")
	}
	waitForKey(addKey("b@acme.test"))
}
