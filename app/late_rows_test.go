package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
)

// ledgerSpend is the team's spend in Postgres and how many rows are final.
func ledgerSpend(t *testing.T, f *fixture) (spent int64, final int) {
	t.Helper()
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 10000)
	must(t, err)
	for _, r := range rows {
		if r.Status != proxy.LedgerHeld {
			spent += r.CostMicros
			final++
		}
	}
	return spent, final
}

// outage is the shape both late-row tests share: replica A, cut from Postgres
// by a forwarder, spends the member's budget (its rows wait in its ledger);
// Redis then loses the counters (FLUSHALL) and replica B rebuilds them from
// Postgres, which lacks A's rows.
type outage struct {
	f           *fixture
	srv         *redistest.Server
	pg          *apptest.TCPProxy
	a, b        *apptest.Replica
	budget, one int64 // the member's budget; one request's cost
	onA         int   // requests A admitted without Postgres
}

// spendOnAWithoutPostgres sets the outage up to the point where B has rebuilt
// without A's rows; A reaches Redis at aRedis.
func spendOnAWithoutPostgres(t *testing.T, f *fixture, srv *redistest.Server, aRedis string) *outage {
	t.Helper()
	o := &outage{f: f, srv: srv, pg: apptest.NewTCPProxy(t, "127.0.0.1:5432")}
	o.b = f.replicaWith(t, map[string]string{"REDIS_URL": srv.URL(), "LEDGER_SPOOL_DIR": t.TempDir()})
	o.a = f.replicaWith(t, map[string]string{"REDIS_URL": aRedis, "LEDGER_SPOOL_DIR": t.TempDir(), "DATABASE_URL": o.pg.Via(f.dbURL)})

	probe := do(t, anthropicRequest(t, o.b.URL, f.key, messagesBody))
	if probe.status != http.StatusOK {
		t.Fatalf("probe: %d %s", probe.status, probe.body)
	}
	first := ledgerRow(t, f, probe.header.Get(proxy.RequestIDHeader))
	o.one, o.budget = first.CostMicros, first.CostMicros+10*first.HeldMicros
	setLimits(t, f, store.Limits{Budget: dollarsPtr(o.budget), BudgetPeriod: "monthly"})
	waitForBudget(t, o.a, f)
	waitForBudget(t, o.b, f)
	// A reads the counters while Postgres answers (the first budgeted admission
	// rebuilds them).
	warm := do(t, anthropicRequest(t, o.a.URL, f.key, messagesBody))
	if warm.status != http.StatusOK {
		t.Fatalf("on A: %d %s", warm.status, warm.body)
	}
	ledgerRow(t, f, warm.header.Get(proxy.RequestIDHeader))

	o.pg.Stop()
	for {
		r := do(t, anthropicRequest(t, o.a.URL, f.key, messagesBody))
		if r.status == http.StatusPaymentRequired {
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("on A without Postgres: %d %s", r.status, r.body)
		}
		if o.onA++; o.onA > 30 {
			t.Fatal("A never refused")
		}
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	must(t, c.FlushAll(context.Background()).Err())
	// B rebuilds from what Postgres holds: the probe only. The one request this
	// admits is what a rebuild in the window before A's rows land may let by.
	if r := do(t, anthropicRequest(t, o.b.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("B's rebuild: %d %s", r.status, r.body)
	}
	return o
}

// landRows gives A its Postgres back and waits until its rows are in.
func (o *outage) landRows(t *testing.T) {
	t.Helper()
	o.pg.Restart(t)
	eventually(t, 20*time.Second, "A's rows in Postgres", func() bool {
		_, final := ledgerSpend(t, o.f)
		return final == 2+o.onA+1
	})
}

// checkBRefuses sends 12 requests through B and fails if it admitted any or the
// ledger ends above the budget plus the one request of the window.
func (o *outage) checkBRefuses(t *testing.T) {
	t.Helper()
	more := 0
	for range 12 {
		r := do(t, anthropicRequest(t, o.b.URL, o.f.key, messagesBody))
		if r.status == http.StatusOK {
			more++
			ledgerRow(t, o.f, r.header.Get(proxy.RequestIDHeader))
		} else if r.status != http.StatusPaymentRequired {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, "every row final", func() bool {
		_, final := ledgerSpend(t, o.f)
		return final == 2+o.onA+1+more
	})
	spent, _ := ledgerSpend(t, o.f)
	t.Logf("A admitted %d without Postgres; B admitted %d after A's rows landed; spent %d µ$ of %d (%d%%)",
		o.onA, more, spent, o.budget, spent*100/o.budget)
	if more > 0 || spent > o.budget+o.one {
		t.Fatalf("spent %d µ$ against a budget of %d µ$ (B admitted %d after A's rows landed), want at most the one request of the window over",
			spent, o.budget, more)
	}
}

// TestRebuildAfterPostgresOutageCountsOtherReplicasRows: once Postgres is back
// and A's rows land, Redis counts them: B refuses from then on. Before, nothing
// counted them again and B admitted about a second budget (190%).
func TestRebuildAfterPostgresOutageCountsOtherReplicasRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	o := spendOnAWithoutPostgres(t, f, srv, srv.URL())
	o.landRows(t)
	time.Sleep(500 * time.Millisecond) // A charges them to Redis right after they land
	o.checkBRefuses(t)
}

// TestLateChargeOutlivesTheReplicaThatOwedIt: as above, but A cannot reach
// Redis when its rows land, and then stops: the late charge it owed is marked
// in Postgres, and B has the counters rebuilt from the ledger, which has A's
// rows. Before, the charge waited in A's memory and died with it: B admitted
// about a second budget.
func TestLateChargeOutlivesTheReplicaThatOwedIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	aRedis := apptest.NewTCPProxy(t, srv.Addr())
	o := spendOnAWithoutPostgres(t, f, srv, aRedis.Via(srv.URL()))
	aRedis.Stop()
	o.landRows(t)
	if err := o.a.Stop(); err != nil && err != http.ErrServerClosed {
		t.Fatal(err)
	}
	// B's watch drops the counters' epoch within about a second of the mark.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	key := fmt.Sprintf("{t:%d}:h", f.team.ID)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		keys, err := c.Keys(context.Background(), "*"+key).Result()
		must(t, err)
		if len(keys) == 1 && !c.HExists(context.Background(), keys[0], "e").Val() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	o.checkBRefuses(t)
	// B's rebuild came after the mark: the next watch clears it.
	eventually(t, 5*time.Second, "the late mark cleared", func() bool {
		marks, err := f.st.LateMarks(context.Background())
		must(t, err)
		return marks[f.team.ID] == 0
	})
}

// TestRestartedReplicaKnowsRestoredCountersAreOld: a replica spends the
// member's budget, with a Redis snapshot taken after the first request, and
// restarts; Redis is then restarted from that snapshot. The new process has
// never read the team, yet it rebuilds the old counters instead of believing
// them: the team's seq watermark is durable in Postgres. Before, it admitted
// the budget again.
func TestRestartedReplicaKnowsRestoredCountersAreOld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": srv.URL()}
	gw := f.replicaWith(t, env)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(2000), BudgetPeriod: "monthly"})
	waitForBudget(t, gw, f)
	call := func(gw *apptest.Replica) int {
		r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
		if r.status == http.StatusOK {
			ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)) // durable, with the watermark
		} else if r.status != http.StatusPaymentRequired {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return r.status
	}
	admitted := 0
	for call(gw) == http.StatusOK {
		if admitted++; admitted == 1 {
			srv.Save()
		}
		if admitted > 20 {
			t.Fatal("never refused")
		}
	}
	if admitted < 2 {
		t.Fatalf("refused after %d requests: the backup must be older than the last ones", admitted)
	}
	if err := gw.Stop(); err != nil && err != http.ErrServerClosed {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Start() // from the backup: one request spent
	restarted := f.replicaWith(t, env)
	for i := range 3 {
		if status := call(restarted); status != http.StatusPaymentRequired {
			t.Fatalf("request %d through the restarted replica after the restore: %d, want the spent budget still refused", i, status)
		}
	}
	if spent, _ := ledgerSpend(t, f); spent > 2000 {
		t.Fatalf("spent %d against 2000", spent)
	}
}
