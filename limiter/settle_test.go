package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// bothLimiters returns a Redis limiter and a Local twin on one injected clock, each
// with the team "team" rebuilt (empty), for tests that must hold for both.
func bothLimiters(t *testing.T) (*clock, map[string]limiter.Limiter) {
	t.Helper()
	clk := newClock()
	ls := map[string]limiter.Limiter{
		"Redis": newRedis(t, redistest.Prefix(t), clk.Now),
		"Local": limiter.NewLocal(clk.Now),
	}
	for _, l := range ls {
		rebuildEmpty(t, l, "team", clk.Now)
	}
	return clk, ls
}

// TestSettleIsExactAndIdempotent settles over- and under-estimates exactly, then
// replays each settle 200 times: none applies.
func TestSettleIsExactAndIdempotent(t *testing.T) {
	t.Parallel()
	_, ls := bothLimiters(t)
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := limiter.Policy{Budget: budget(10*dollar, limiter.PeriodMonthly), TokensPerMinute: 1000}
			req := func(hold, tokens int64) limiter.Request {
				return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: hold, Tokens: tokens,
					Lease: time.Minute, MemberPolicy: p}
			}
			over, under := req(3*dollar, 400), req(dollar, 100)
			dOver, dUnder := admit(t, l, over), admit(t, l, under)
			if dUnder.BudgetRemaining != 6*dollar {
				t.Fatalf("after holds of $3 and $1: %+v", dUnder)
			}
			settles := []limiter.Settlement{
				{Team: "team", Member: "ada", RequestID: over.RequestID, Cost: dollar / 2, Tokens: 150, Epoch: dOver.Epoch},
				{Team: "team", Member: "ada", RequestID: under.RequestID, Cost: 2 * dollar, Tokens: 300, Epoch: dUnder.Epoch},
			}
			for _, s := range settles {
				if r := settle(t, l, s); r != (limiter.SettleResult{Applied: true, Known: true}) {
					t.Fatalf("first settle of %s: %+v", s.RequestID, r)
				}
			}
			// Spent $2.50, nothing held: $7.50 left. Tokens: 1000 - 150 - 300 = 550.
			probe := req(0, 550)
			d := admit(t, l, probe)
			if !d.Allowed || d.BudgetRemaining != 7*dollar+dollar/2 {
				t.Fatalf("after settles: %+v, want $7.50 left and 550 tokens", d)
			}
			settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: probe.RequestID, Tokens: 550, Epoch: d.Epoch})
			if d := admit(t, l, req(0, 1)); d.Allowed || d.Reason != limiter.ReasonTPM {
				t.Fatalf("bucket should be empty: %+v", d)
			}
			applied := 0
			for i := range 200 {
				r := settle(t, l, settles[i%2])
				if r.Applied {
					applied++
				}
				if r != (limiter.SettleResult{}) {
					t.Fatalf("replay %d: %+v, want nothing applied, the hold no longer known", i, r)
				}
			}
			if applied != 0 {
				t.Fatalf("%d of 200 replayed settles applied", applied)
			}
			if d := admit(t, l, req(0, 0)); d.BudgetRemaining != 7*dollar+dollar/2 {
				t.Fatalf("after replays: %+v, want $7.50 left", d)
			}
		})
	}
}

// TestSettleCannotTouchAnotherHold reuses a request id the way a forged X-Request-Id
// would: admitting it again is refused, a settle under another member's name or an
// id never admitted changes nothing, and settling one id leaves every other hold.
func TestSettleCannotTouchAnotherHold(t *testing.T) {
	t.Parallel()
	_, ls := bothLimiters(t)
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			team := limiter.Policy{Budget: budget(4*dollar, limiter.PeriodTotal)}
			req := func(member string) limiter.Request {
				return limiter.Request{Team: "team", Member: member, RequestID: rid(), Hold: dollar, Lease: time.Minute, TeamPolicy: team}
			}
			a, b := req("ada"), req("bob")
			da, db := admit(t, l, a), admit(t, l, b)

			again := a
			if _, err := l.Admit(context.Background(), again); !errors.Is(err, limiter.ErrHoldExists) {
				t.Fatalf("admitting a held request id again: %v, want ErrHoldExists", err)
			}
			for _, s := range []limiter.Settlement{
				{Team: "team", Member: "bob", RequestID: a.RequestID, Epoch: db.Epoch},               // ada's id, bob's name
				{Team: "team", Member: "ada", RequestID: "never-admitted", Cost: 1, Epoch: da.Epoch}, // an id nobody holds
				{Team: "other", Member: "ada", RequestID: a.RequestID, Epoch: da.Epoch},              // another team
			} {
				if r := settle(t, l, s); r != (limiter.SettleResult{}) {
					t.Fatalf("settle %+v: %+v, want nothing done", s, r)
				}
			}
			// Both holds are still there: $2 of $4 left.
			if d := admit(t, l, limiter.Request{Team: "team", Member: "cy", RequestID: rid(), TeamPolicy: team}); d.BudgetRemaining != 2*dollar {
				t.Fatalf("after forged settles: %+v, want $2 left", d)
			}
			settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: a.RequestID, Epoch: da.Epoch})
			if d := admit(t, l, limiter.Request{Team: "team", Member: "cy", RequestID: rid(), TeamPolicy: team}); d.BudgetRemaining != 3*dollar {
				t.Fatalf("after releasing ada's hold: %+v, want $3 left (bob's hold kept)", d)
			}
		})
	}
}

// TestUnderEstimateIsCarriedAsDebt runs a member whose every request costs ten times
// its hold: the budget is passed by at most one request's excess, and the TPM bucket
// goes into debt and refuses until it is repaid.
func TestUnderEstimateIsCarriedAsDebt(t *testing.T) {
	t.Parallel()
	_, ls := bothLimiters(t)
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const hold, limit = 30_000, 10 * dollar
			p := limiter.Policy{Budget: budget(limit, limiter.PeriodTotal)}
			var spent, admitted int64
			for range 1000 {
				req := limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: hold, Lease: time.Minute, MemberPolicy: p}
				d := admit(t, l, req)
				if !d.Allowed {
					if d.Reason != limiter.ReasonBudget {
						t.Fatalf("refused with %+v", d)
					}
					break
				}
				admitted++
				settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: req.RequestID, Cost: 10 * hold, Epoch: d.Epoch})
				spent += 10 * hold
			}
			if spent > limit+9*hold || spent <= limit-10*hold {
				t.Fatalf("spent %d against %d over %d requests; want at most one excess (%d) over", spent, limit, admitted, 9*hold)
			}

			// TPM: 100 reserved, 1,000 used: 400 in debt, refused for 50 s.
			tp := limiter.Policy{TokensPerMinute: 600}
			req := limiter.Request{Team: "team", Member: "bob", RequestID: rid(), Tokens: 100, Lease: time.Minute, MemberPolicy: tp}
			d := admit(t, l, req)
			settle(t, l, limiter.Settlement{Team: "team", Member: "bob", RequestID: req.RequestID, Tokens: 1000, Epoch: d.Epoch})
			req.RequestID, req.Tokens = rid(), 0
			d = admit(t, l, req)
			if d.Allowed || d.Reason != limiter.ReasonTPM || d.RetryAfter != 40*time.Second || d.Remaining != 0 {
				t.Fatalf("in debt: %+v, want refused for 40s", d)
			}
		})
	}
}

// TestSettleAllIsExact settles a batch (one pipeline on Redis) exactly: each hold
// is replaced by its cost, a replayed batch changes nothing, and a batch sent to
// a Redis that lost its script cache (SCRIPT FLUSH) is still applied once. Its
// Redis is its own: a SCRIPT FLUSH on the shared server would reach every test.
func TestSettleAllIsExact(t *testing.T) {
	t.Parallel()
	clk := newClock()
	client := redis.NewClient(&redis.Options{Addr: redistest.StartServer(t).Addr()})
	t.Cleanup(func() { client.Close() })
	ls := map[string]limiter.Limiter{
		"Redis": limiter.NewRedis(client, limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: testTimeout, Now: clk.Now}),
		"Local": limiter.NewLocal(clk.Now),
	}
	for _, l := range ls {
		rebuildEmpty(t, l, "team", clk.Now)
	}
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := limiter.Policy{Budget: budget(100*dollar, limiter.PeriodTotal)}
			batch := func(n int) []limiter.Settlement {
				var ss []limiter.Settlement
				for range n {
					req := limiter.Request{Team: "team", Member: "bob", RequestID: rid(), Hold: dollar, Lease: time.Minute, MemberPolicy: p}
					d := admit(t, l, req)
					ss = append(ss, limiter.Settlement{Team: "team", Member: "bob", RequestID: req.RequestID, Cost: dollar / 4, Epoch: d.Epoch})
				}
				return ss
			}
			check := func(ss []limiter.Settlement) {
				t.Helper()
				for i, err := range l.SettleAll(context.Background(), ss) {
					if err != nil {
						t.Fatalf("settle %d: %v", i, err)
					}
				}
			}
			first := batch(10)
			check(first)
			check(first) // a replay
			if _, ok := l.(*limiter.Redis); ok {
				if err := client.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			check(batch(10))
			// 20 requests at $0.25 each, nothing held: $95 left.
			if d := admit(t, l, limiter.Request{Team: "team", Member: "bob", RequestID: rid(), MemberPolicy: p}); d.BudgetRemaining != 95*dollar {
				t.Fatalf("after two batches and a replay: %+v, want $95 left", d)
			}
		})
	}
}

// TestAdmitAfterSettlesFirst: AdmitAfter runs the earlier request's settle
// before it decides, so room the settle gives back is there for the admission,
// and with Redis both go in one script call.
func TestAdmitAfterSettlesFirst(t *testing.T) {
	t.Parallel()
	_, ls := bothLimiters(t)
	for name, l := range ls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := limiter.Policy{Budget: budget(10*dollar, limiter.PeriodMonthly)}
			req := func() limiter.Request {
				return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: 6 * dollar, Lease: time.Minute, MemberPolicy: p}
			}
			first, second := req(), req()
			d := admit(t, l, first)
			// The first's hold of $6 leaves no room for another; it really cost $1.
			s := limiter.Settlement{Team: "team", Member: "ada", RequestID: first.RequestID, Cost: dollar, Epoch: d.Epoch}
			d, errs, err := l.AdmitAfter(context.Background(), []limiter.Settlement{s, {Team: "team"}}, second)
			if err != nil || !d.Allowed || d.BudgetRemaining != 3*dollar {
				t.Fatalf("after the settle: %+v, %v; want admitted with $3 left", d, err)
			}
			if len(errs) != 2 || errs[0] != nil || errs[1] == nil {
				t.Fatalf("settle errors %v, want the valid one applied and the invalid one refused", errs)
			}
			if r := settle(t, l, s); r.Applied {
				t.Fatalf("the settle was not applied by AdmitAfter: %+v", r)
			}
		})
	}
	t.Run("one round trip", func(t *testing.T) {
		t.Parallel()
		client := redistest.Client(t)
		trips := &roundTrips{}
		client.AddHook(trips)
		l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: testTimeout})
		rebuildEmpty(t, l, "team", nil)
		r := budgetRequest()
		r.RequestID = rid()
		d := admit(t, l, r)
		prev := limiter.Settlement{Team: r.Team, Member: r.Member, RequestID: r.RequestID, Cost: 1, Epoch: d.Epoch}
		if err := release(context.Background(), l, r.Team, r.Member, "warm-up"); err != nil {
			t.Fatal(err) // SETTLE is cached in Redis from here on, and ADMIT since the admit above
		}
		const n = 20
		trips.n.Store(0)
		trips.cmds.Store(0)
		for range n {
			r.RequestID = rid()
			d, errs, err := l.AdmitAfter(context.Background(), []limiter.Settlement{prev}, r)
			if err != nil || !d.Allowed || errs[0] != nil {
				t.Fatalf("%+v %v %v", d, errs, err)
			}
			prev = limiter.Settlement{Team: r.Team, Member: r.Member, RequestID: r.RequestID, Cost: 1, Epoch: d.Epoch}
		}
		if got := trips.n.Load(); got != n {
			t.Fatalf("%d round trips for %d settle+admit, want %d", got, n, n)
		}
		// The ADMIT carries the settle: one script call for both.
		if got := trips.cmds.Load(); got != n {
			t.Fatalf("%d commands for %d settle+admit, want %d", got, n, n)
		}
	})
}
