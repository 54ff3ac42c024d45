package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

// TestBudgetRequestAppearsLive: a budget request made while an owner's
// dashboard is open reaches it over the stream, without a reload, as the
// pending-requests section swapped out of band; once shown, it is not pushed
// again while the list stays the same (a note being typed is not wiped).
func TestBudgetRequestAppearsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *console.Options) { o.StreamInterval = 100 * time.Millisecond })
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")
	ctx := t.Context()
	budget := int64(10_000_000)
	if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, ada.ID, store.Limits{RatePeriod: time.Second, Budget: &budget}); err != nil {
		t.Fatal(err)
	}
	s := owner.openStream("/console/dashboard/live")
	if _, err := s.next(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RequestBudget(ctx, store.MemberActor(ada.ID), o.TeamID, ada.ID, 5_000_000, "eval run for the paper"); err != nil {
		t.Fatal(err)
	}
	const push = `hx-swap-oob="innerHTML:#pending-requests"`
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev, err := s.next(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ev.data, push) {
			if !strings.Contains(ev.data, "ada@acme.test") || !strings.Contains(ev.data, "eval run for the paper") ||
				!strings.Contains(ev.data, ">Approve<") {
				t.Fatalf("pushed requests:\n%.2000s", ev.data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the open dashboard")
		}
	}
	// Past the next figures refresh: the list is the same, so not pushed again.
	until := time.Now().Add(6 * time.Second)
	for time.Now().Before(until) {
		ev, err := s.next(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ev.data, push) {
			t.Fatal("an unchanged list of requests was pushed again")
		}
	}
}
