package app_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
)

// TestRebuildReadsPeriodsOnTheLimitersClock: Redis (its TIME) is 3 minutes into
// the next UTC day while this replica's clock is still in the day before, when
// the team's counters are rebuilt; the daily counter holds the spend of Redis's
// day, the one admission charges, not the replica's.
func TestRebuildReadsPeriodsOnTheLimitersClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "daily"})
	start := time.Now()
	redisStart := start.UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 3*time.Minute)
	redisNow := func() time.Time { return redisStart.Add(time.Since(start)) }
	// Spend recorded by replicas whose clocks agree with Redis: 100 µ$ the day
	// before, 7 µ$ in Redis's current day.
	var rows []proxy.LedgerEntry
	for i, at := range map[int64]time.Time{100: redisStart.Add(-10 * time.Minute), 7: redisStart.Add(-time.Minute)} {
		rows = append(rows, proxy.LedgerEntry{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: f.keyID, Model: "claude-sonnet-4-5",
			RequestID: "earlier-" + strconv.FormatInt(i, 10), Status: proxy.LedgerSettled, CostMicros: i, CreatedAt: at, SettledAt: at})
	}
	must(t, f.st.WriteLedger(context.Background(), rows))

	gw := f.replicaWith(t, nil, app.WithLimiterClock(redisNow))
	waitForBudget(t, gw, f)
	r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
	if r.status != 200 {
		t.Fatalf("first request after the loss: %d %s", r.status, r.body)
	}
	cost := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)).CostMicros
	lim := limiter.NewRedis(redistest.Client(t), limiter.RedisOptions{Prefix: f.redisPrefix, Now: redisNow})
	spent, _, err := lim.Spent(context.Background(), strconv.FormatInt(f.team.ID, 10), limiter.PeriodDaily)
	must(t, err)
	if got, want := spent[strconv.FormatInt(f.member.ID, 10)], 7+cost; got != want {
		t.Fatalf("daily counter after the rebuild = %d µ$, want %d (7 µ$ of Redis's day plus this request's %d)", got, want, cost)
	}
}

// TestSkewedReplicaClockAcrossMidnight: Redis (its TIME) is 2 minutes into the
// next UTC day; this replica's own clock is 4 minutes behind it, still in the day
// in which the member spent the whole daily budget. Admission charges Redis's
// day, so the member is admitted; when Redis then loses the counters, the rebuild
// sums Redis's day too, counting the request this replica admitted while its own
// clock still said yesterday, and not yesterday's spend.
func TestSkewedReplicaClockAcrossMidnight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const budget = 5000
	setLimits(t, f, store.Limits{Budget: dollarsPtr(budget), BudgetPeriod: "daily"})
	start := time.Now()
	redisStart := start.UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 2*time.Minute)
	redisNow := func() time.Time { return redisStart.Add(time.Since(start)) }
	replicaNow := func() time.Time { return redisNow().Add(-4 * time.Minute) }
	yesterday := redisStart.Add(-10 * time.Minute) // in the replica's current day, not Redis's
	must(t, f.st.WriteLedger(context.Background(), []proxy.LedgerEntry{{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: f.keyID,
		Model: "claude-sonnet-4-5", RequestID: "yesterday", Status: proxy.LedgerSettled, CostMicros: budget, CreatedAt: yesterday, SettledAt: yesterday}}))

	gw := f.replicaWith(t, nil, app.WithLimiterClock(redisNow), app.WithClock(replicaNow))
	waitForBudget(t, gw, f)
	first, second, lim := costsAcrossALoss(t, f, gw, redisNow)
	spent, _, err := lim.Spent(context.Background(), strconv.FormatInt(f.team.ID, 10), limiter.PeriodDaily)
	must(t, err)
	if got, want := spent[strconv.FormatInt(f.member.ID, 10)], first+second; got != want {
		t.Fatalf("daily counter after the rebuild = %d µ$, want %d: the two requests of Redis's day (%d + %d)", got, want, first, second)
	}
}

// TestSkewedReplicaFilesEveryPeriod: the ledger files a request under the
// instant Redis charged it, so every budget that applies is rebuilt on its own
// period, not only the tightest one. Here the member's monthly budget is the
// tightest and the team's daily one looser; the replica's clock is still in
// the day before Redis's (in the same month, unless Redis's day is the 1st).
func TestSkewedReplicaFilesEveryPeriod(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(50_000), BudgetPeriod: "monthly"})
	_, err := f.st.SetTeamLimits(context.Background(), store.ActorCLI, f.team.ID, store.Limits{RatePeriod: time.Second,
		Budget: dollarsPtr(5_000_000), BudgetPeriod: "daily"})
	must(t, err)
	start := time.Now()
	redisStart := start.UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 2*time.Minute)
	redisNow := func() time.Time { return redisStart.Add(time.Since(start)) }
	replicaNow := func() time.Time { return redisNow().Add(-4 * time.Minute) }
	gw := f.replicaWith(t, nil, app.WithLimiterClock(redisNow), app.WithClock(replicaNow))
	waitForBudget(t, gw, f)
	eventually(t, 10*time.Second, "team budget reaches the replica", func() bool {
		tm, _ := gw.App.Snapshots.Current().Team(f.team.ID)
		return tm.Limits.Budget != nil
	})
	first, second, lim := costsAcrossALoss(t, f, gw, redisNow)
	_, team, err := lim.Spent(context.Background(), strconv.FormatInt(f.team.ID, 10), limiter.PeriodDaily)
	must(t, err)
	if want := first + second; team != want {
		t.Fatalf("team's daily counter after the rebuild = %d µ$, want %d: the two requests of Redis's day (%d + %d)", team, want, first, second)
	}
}

// costsAcrossALoss makes a paid call through gw, has Redis lose the team's
// counters, and makes another, which rebuilds them first; it returns both
// calls' costs and a limiter that reads the counters on Redis's clock.
func costsAcrossALoss(t *testing.T, f *fixture, gw *apptest.Replica, redisNow func() time.Time) (first, second int64, lim *limiter.Redis) {
	t.Helper()
	call := func(what string) int64 {
		t.Helper()
		r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
		if r.status != 200 {
			t.Fatalf("%s: %d %s (spend of another day counted?)", what, r.status, r.body)
		}
		return ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)).CostMicros
	}
	first = call("admission on Redis's day, the replica's clock still in yesterday")
	c := redistest.Client(t)
	keys, err := c.Keys(context.Background(), f.redisPrefix+"*").Result()
	must(t, err)
	must(t, c.Del(context.Background(), keys...).Err())
	second = call("the first admission after the loss")
	return first, second, limiter.NewRedis(c, limiter.RedisOptions{Prefix: f.redisPrefix, Now: redisNow})
}
