package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// ledger is the gateway's ledger as the tests model it: each settled request's cost,
// per member, written as the settle happens.
type ledger struct {
	mu    sync.Mutex
	spent map[string]int64
}

func (l *ledger) add(member string, cost int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spent == nil {
		l.spent = map[string]int64{}
	}
	l.spent[member] += cost
}

// state is the TeamState a gateway computes from the ledger: every member's budget
// listed, its spend in the (daily) period, and the team's total.
func (l *ledger) state(at time.Time, members []string) limiter.TeamState {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := limiter.TeamState{At: at, Team: map[limiter.Period]int64{}, Members: map[string]map[limiter.Period]int64{}}
	for _, m := range members {
		s.Members[m] = map[limiter.Period]int64{limiter.PeriodDaily: l.spent[m]}
		s.Team[limiter.PeriodTotal] += l.spent[m]
	}
	return s
}

// TestFlushAndRebuild kills Redis in the middle of a run and restarts it empty: budget
// requests are refused with ReasonRebuild until a gateway rebuilds the team from its
// ledger; replicas racing to rebuild apply one sum; a member over budget stays refused;
// a hold in flight at the loss is charged when it settles; and nobody ends further over
// budget than the holds that were in flight at the fault.
func TestFlushAndRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit, hold = 5 * dollar, dollar / 10
	members := []string{"ada", "bob", "cy", "dee"}
	srv := redistest.StartServer(t)
	clk := newClock()
	replicas := make([]*limiter.Redis, 3)
	for i := range replicas {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		replicas[i] = limiter.NewRedis(c, limiter.RedisOptions{Prefix: "flush:", Timeout: testTimeout, Now: clk.Now})
	}
	var book ledger
	request := func(member string, hold int64) limiter.Request {
		return limiter.Request{Team: "team", Member: member, RequestID: rid(), Hold: hold, Lease: time.Minute,
			MemberPolicy: limiter.Policy{Budget: budget(limit, limiter.PeriodDaily)},
			TeamPolicy:   limiter.Policy{Budget: budget(100*dollar, limiter.PeriodTotal)}}
	}
	// spend admits and settles requests of member at cost = hold until the budget
	// refuses, across the replicas.
	spend := func(member string, upTo int64) {
		for i := 0; book.spent[member] < upTo; i++ {
			req := request(member, hold)
			d := admit(t, replicas[i%3], req)
			if !d.Allowed {
				t.Fatalf("%s refused at %d: %+v", member, book.spent[member], d)
			}
			settle(t, replicas[i%3], limiter.Settlement{Team: "team", Member: member, RequestID: req.RequestID, Cost: hold, Epoch: d.Epoch})
			book.add(member, hold)
		}
	}

	if d := admit(t, replicas[0], request("ada", hold)); d.Reason != limiter.ReasonRebuild {
		t.Fatalf("a fresh Redis: %+v, want a rebuild", d)
	}
	if err := replicas[0].Rebuild(ctx, "team", book.state(clk.Now(), members)); err != nil {
		t.Fatal(err)
	}
	spend("ada", limit) // ada is at her limit
	spend("bob", 3*dollar)
	// Requests in flight when Redis dies: bob holds $1, cy $0.50.
	bobs, cys := request("bob", dollar), request("cy", dollar/2)
	dBob, dCy := admit(t, replicas[1], bobs), admit(t, replicas[2], cys)
	if !dBob.Allowed || !dCy.Allowed {
		t.Fatalf("in-flight holds: %+v %+v", dBob, dCy)
	}

	srv.Kill()
	srv.Start()

	if _, err := replicas[0].Admit(ctx, request("cy", hold)); err != nil {
		t.Logf("first call after the restart: %v", err) // a dead pooled connection
	}
	for _, m := range members {
		if d := admit(t, replicas[1], request(m, hold)); d.Allowed || d.Reason != limiter.ReasonRebuild || d.BudgetRemaining != -1 {
			t.Fatalf("%s after the flush: %+v, want a rebuild", m, d)
		}
	}
	// cy's request ends before the rebuild: Redis cannot count it, the ledger does.
	if r := settle(t, replicas[2], limiter.Settlement{Team: "team", Member: "cy", RequestID: cys.RequestID,
		Cost: dollar / 4, Epoch: dCy.Epoch}); r != (limiter.SettleResult{}) {
		t.Fatalf("settle before the rebuild: %+v, want nothing done", r)
	}
	book.add("cy", dollar/4)

	// Two replicas race to rebuild from the same ledger read.
	state := book.state(clk.Now(), members)
	var wg sync.WaitGroup
	for _, r := range replicas[:2] {
		wg.Go(func() {
			if err := r.Rebuild(ctx, "team", state); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// bob's request ends after the rebuild: charged to the current period (Lost).
	if r := settle(t, replicas[1], limiter.Settlement{Team: "team", Member: "bob", RequestID: bobs.RequestID,
		Cost: dollar * 8 / 10, Epoch: dBob.Epoch}); r != (limiter.SettleResult{Applied: true, Lost: true}) {
		t.Fatalf("settle after the rebuild: %+v, want applied as lost", r)
	}
	book.add("bob", dollar*8/10)
	// A late, stale rebuild must not overwrite what happened since.
	if err := replicas[2].Rebuild(ctx, "team", state); err != nil {
		t.Fatal(err)
	}

	if d := admit(t, replicas[0], request("ada", hold)); d.Allowed || d.Reason != limiter.ReasonBudget {
		t.Fatalf("ada, at her limit before the flush: %+v, want still refused", d)
	}
	if d := admit(t, replicas[0], request("bob", 0)); !d.Allowed || d.BudgetRemaining != limit-3*dollar-dollar*8/10 {
		t.Fatalf("bob: %+v, want $1.20 left", d)
	}
	if d := admit(t, replicas[0], request("cy", 0)); !d.Allowed || d.BudgetRemaining != limit-dollar/4 {
		t.Fatalf("cy: %+v, want $4.75 left", d)
	}

	// Everyone races to spend the rest, 3 replicas × 8 goroutines.
	for w := range 24 {
		wg.Go(func() {
			for i := 0; ; i++ {
				m := members[(w+i)%len(members)]
				req := request(m, hold)
				l := replicas[w%3]
				d, err := l.Admit(ctx, req)
				if err != nil || (!d.Allowed && d.Reason != limiter.ReasonBudget) {
					t.Errorf("%s: %+v, %v", m, d, err)
					return
				}
				if !d.Allowed {
					if book.exhausted(members, limit-hold) {
						return
					}
					continue
				}
				if _, err := l.Settle(ctx, limiter.Settlement{Team: "team", Member: m, RequestID: req.RequestID, Cost: hold, Epoch: d.Epoch}); err != nil {
					t.Error(err)
					return
				}
				book.add(m, hold)
			}
		})
	}
	wg.Wait()
	// The only overspend allowed is what was in flight at the fault: bob's $0.80.
	for _, m := range members {
		if got := book.spent[m]; got > limit {
			t.Errorf("%s spent %d of %d", m, got, limit)
		}
	}
}

// exhausted reports whether every member has spent more than floor.
func (l *ledger) exhausted(members []string, floor int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range members {
		if l.spent[m] <= floor {
			return false
		}
	}
	return true
}

// TestRebuildRules covers the rest of Rebuild: a marker already set wins, the sums
// of a period already over are dropped, a TeamState from a later period is refused,
// and revocations and cut-offs come back; on Redis and on Local (after Forget).
func TestRebuildRules(t *testing.T) {
	t.Parallel()
	clk := newClock() // 2026-11-30 12:00 UTC: a day and a month end at midnight
	for name, l := range map[string]limiter.Limiter{
		"Redis": newRedis(t, redistest.Prefix(t), clk.Now),
		"Local": limiter.NewLocal(clk.Now),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, team := range []string{"early", "late", "flags"} {
				forget(t, l, team)
			}
			p := limiter.Policy{Budget: budget(10*dollar, limiter.PeriodDaily)}
			req := func(team, key string) limiter.Request {
				return limiter.Request{Team: team, Member: "ada", KeyID: key, RequestID: rid(), Lease: time.Minute, MemberPolicy: p,
					TeamPolicy: limiter.Policy{Budget: budget(10*dollar, limiter.PeriodMonthly)}}
			}
			spent := func(d int64) map[string]map[limiter.Period]int64 {
				return map[string]map[limiter.Period]int64{"ada": {limiter.PeriodDaily: d}}
			}
			tomorrow := clk.Now().Add(12 * time.Hour)
			if err := l.Rebuild(ctx, "early", limiter.TeamState{At: tomorrow, Members: spent(dollar)}); !errors.Is(err, limiter.ErrRebuildEarly) {
				t.Fatalf("a TeamState from tomorrow: %v, want ErrRebuildEarly", err)
			}
			yesterday := clk.Now().Add(-13 * time.Hour)
			if err := l.Rebuild(ctx, "late", limiter.TeamState{At: yesterday, Members: spent(4 * dollar),
				Team: map[limiter.Period]int64{limiter.PeriodMonthly: 3 * dollar}}); err != nil {
				t.Fatal(err)
			}
			if d := admit(t, l, req("late", "k")); d.BudgetRemaining != 7*dollar || d.BudgetScope != limiter.ScopeTeam {
				t.Fatalf("yesterday's daily sum dropped, this month's kept: %+v, want $7 left (team)", d)
			}
			if err := l.Rebuild(ctx, "late", limiter.TeamState{At: clk.Now(), Members: spent(9 * dollar)}); err != nil {
				t.Fatal(err)
			}
			if d := admit(t, l, req("late", "k")); d.BudgetRemaining != 7*dollar {
				t.Fatalf("a second rebuild changed the counters: %+v", d)
			}
			if err := l.Rebuild(ctx, "flags", limiter.TeamState{At: clk.Now(), RevokedKeys: []string{"old"}, CutOff: []string{"bob"}}); err != nil {
				t.Fatal(err)
			}
			if d := admit(t, l, req("flags", "old")); d.Reason != limiter.ReasonRevoked {
				t.Fatalf("revoked key after rebuild: %+v", d)
			}
			bob := req("flags", "k")
			bob.Member = "bob"
			if d := admit(t, l, bob); d.Reason != limiter.ReasonCutOff {
				t.Fatalf("cut-off member after rebuild: %+v", d)
			}
		})
	}
}

// forget makes l lose team's state: Local forgets it, Redis loses its keys.
func forget(t *testing.T, l limiter.Limiter, team string) {
	t.Helper()
	switch l := l.(type) {
	case *limiter.Local:
		l.Forget(team)
	case *limiter.Redis:
		// Nothing to do: a team this test never used has no keys, as after a flush.
	default:
		panic(fmt.Sprintf("forget %T", l))
	}
}

// TestOlderSnapshotIsNotBelieved restarts Redis from a snapshot taken before the last
// requests, as restoring an older backup (or failing over to a replica that lagged)
// would: its counters are older than what the replicas saw, so the next admission
// asks for a rebuild instead of admitting on them, and the member who had spent her
// budget stays refused. Without the check, the snapshot's counters would admit four
// more requests.
func TestOlderSnapshotIsNotBelieved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit, hold = dollar, dollar / 10
	srv := redistest.StartServer(t)
	clk := newClock()
	replicas := make([]*limiter.Redis, 2)
	for i := range replicas {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		replicas[i] = limiter.NewRedis(c, limiter.RedisOptions{Prefix: "old:", Timeout: testTimeout, Now: clk.Now})
	}
	var book ledger
	members := []string{"ada"}
	request := func() limiter.Request {
		return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: hold, Lease: time.Minute,
			MemberPolicy: limiter.Policy{Budget: budget(limit, limiter.PeriodDaily)}}
	}
	if err := replicas[0].Rebuild(ctx, "team", book.state(clk.Now(), members)); err != nil {
		t.Fatal(err)
	}
	// spend admits and settles n requests at cost = hold, across the replicas.
	spend := func(n int) {
		for i := range n {
			req := request()
			d := admit(t, replicas[i%2], req)
			if !d.Allowed {
				t.Fatalf("refused at %d: %+v", book.spent["ada"], d)
			}
			settle(t, replicas[i%2], limiter.Settlement{Team: "team", Member: "ada", RequestID: req.RequestID, Cost: hold, Epoch: d.Epoch})
			book.add("ada", hold)
		}
	}
	spend(6)
	srv.Save() // the backup: $0.60 spent
	spend(4)
	for _, r := range replicas {
		if d := admit(t, r, request()); d.Allowed || d.Reason != limiter.ReasonBudget {
			t.Fatalf("at her limit: %+v, want refused", d)
		}
	}

	srv.Kill()
	srv.Start() // restored from the backup
	for i, r := range replicas {
		_, _ = r.Admit(ctx, request()) // a dead pooled connection
		if d := admit(t, r, request()); d.Allowed || d.Reason != limiter.ReasonRebuild {
			t.Fatalf("replica %d on the older snapshot: %+v, want a rebuild", i, d)
		}
	}
	if err := replicas[1].Rebuild(ctx, "team", book.state(clk.Now(), members)); err != nil {
		t.Fatal(err)
	}
	for i, r := range replicas {
		if d := admit(t, r, request()); d.Allowed || d.Reason != limiter.ReasonBudget || d.BudgetRemaining != 0 {
			t.Fatalf("replica %d after the rebuild: %+v, want refused with nothing left", i, d)
		}
	}
}

// TestRebuildRestoresHoldsInFlight rebuilds a team with requests in flight: each
// holds its amount again until it settles at its real cost, and one whose lease has
// ended is swept and charged in full by the next admission.
func TestRebuildRestoresHoldsInFlight(t *testing.T) {
	t.Parallel()
	clk := newClock()
	local := limiter.NewLocal(clk.Now)
	local.Forget("team") // as a fresh Redis is
	ls := map[string]limiter.Limiter{"Redis": newRedis(t, redistest.Prefix(t), clk.Now), "Local": local}
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			state := limiter.TeamState{At: clk.Now(),
				Members: map[string]map[limiter.Period]int64{"ada": {limiter.PeriodDaily: dollar}},
				Team:    map[limiter.Period]int64{limiter.PeriodTotal: dollar},
				Holds: []limiter.RebuiltHold{
					{RequestID: "streaming", Member: "ada", Hold: 2 * dollar, MemberBudget: limiter.PeriodDaily,
						TeamBudget: limiter.PeriodTotal, Expires: clk.Now().Add(time.Minute), Meta: "m"},
					{RequestID: "abandoned", Member: "ada", Hold: dollar, MemberBudget: limiter.PeriodDaily,
						Expires: clk.Now().Add(-time.Second), Meta: "gone"},
				}}
			if err := l.Rebuild(ctx, "team", state); err != nil {
				t.Fatal(err)
			}
			req := func(hold int64) limiter.Request {
				return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: hold, Lease: time.Minute,
					MemberPolicy: limiter.Policy{Budget: budget(5*dollar, limiter.PeriodDaily)},
					TeamPolicy:   limiter.Policy{Budget: budget(100*dollar, limiter.PeriodTotal)}}
			}
			// $1 spent, $2 in flight, $1 abandoned (swept now, charged): $1 left.
			d := admit(t, l, req(2*dollar))
			if d.Allowed || d.Reason != limiter.ReasonBudget || d.BudgetRemaining != dollar ||
				len(d.Expired) != 1 || d.Expired[0] != (limiter.ExpiredHold{RequestID: "abandoned", Hold: dollar, Meta: "gone"}) {
				t.Fatalf("beside the rebuilt holds: %+v", d)
			}
			if r := settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: "streaming", Cost: dollar / 2, Epoch: 1}); !r.Applied || !r.Known {
				t.Fatalf("the request in flight settles: %+v, want applied", r)
			}
			if d := admit(t, l, req(0)); d.BudgetRemaining != 5*dollar-dollar-dollar-dollar/2 {
				t.Fatalf("after it settled at $0.50: %+v, want $2.50 left", d)
			}
		})
	}
}
