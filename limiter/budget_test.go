package limiter_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

const dollar = 1_000_000 // micro-dollars

func budget(limit int64, p limiter.Period) *limiter.Budget {
	return &limiter.Budget{Limit: limit, Period: p}
}

// TestBudgetIsExactAcrossReplicas races 64 holds of $1 over 3 limiter instances (3
// connection pools) against a $10 budget: exactly 10 are admitted, for a member's own
// budget and for a team budget spanning several members.
func TestBudgetIsExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	const replicas, requests = 3, 64
	tests := []struct {
		name   string
		member func(i int) string
		policy func(r *limiter.Request)
	}{
		{"Member", func(int) string { return "ada" },
			func(r *limiter.Request) { r.MemberPolicy.Budget = budget(10*dollar, limiter.PeriodDaily) }},
		{"Team", func(i int) string { return fmt.Sprintf("member-%d", i%7) },
			func(r *limiter.Request) {
				r.MemberPolicy.Budget = budget(100*dollar, limiter.PeriodMonthly)
				r.TeamPolicy.Budget = budget(10*dollar, limiter.PeriodTotal)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			ls := make([]*limiter.Redis, replicas)
			for i := range ls {
				ls[i] = newRedis(t, prefix, nil)
			}
			rebuildEmpty(t, ls[0], "team", nil)
			var admitted, refused atomic.Int64
			var wg sync.WaitGroup
			for i := range requests {
				wg.Go(func() {
					req := limiter.Request{Team: "team", Member: tt.member(i), RequestID: rid(), Hold: dollar, Lease: time.Minute}
					tt.policy(&req)
					d, err := ls[i%replicas].Admit(context.Background(), req)
					switch {
					case err != nil:
						t.Error(err)
					case d.Allowed:
						admitted.Add(1)
					case d.Reason == limiter.ReasonBudget && !d.TooLarge:
						refused.Add(1)
					default:
						t.Errorf("refused with %+v", d)
					}
				})
			}
			wg.Wait()
			if admitted.Load() != 10 || refused.Load() != requests-10 {
				t.Fatalf("admitted %d, refused %d of %d; want exactly 10 admitted", admitted.Load(), refused.Load(), requests)
			}
		})
	}
}

// TestBudgetRules checks the budget arithmetic and the Decision's budget figures, on
// the Redis limiter and on Local, which must agree.
func TestBudgetRules(t *testing.T) {
	t.Parallel()
	clk := newClock() // 2026-11-30 12:00 UTC
	endOfDay := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for name, l := range map[string]limiter.Limiter{
		"Redis": newRedis(t, redistest.Prefix(t), clk.Now),
		"Local": limiter.NewLocal(clk.Now),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rebuildEmpty(t, l, "team", clk.Now)
			req := func(member string, hold int64, p limiter.Policy) limiter.Request {
				return limiter.Request{Team: "team", Member: member, RequestID: rid(), Hold: hold, Lease: time.Minute,
					MemberPolicy: p, TeamPolicy: limiter.Policy{Budget: budget(8*dollar, limiter.PeriodTotal)}}
			}
			daily := limiter.Policy{Budget: budget(5*dollar, limiter.PeriodDaily)}

			d := admit(t, l, req("ada", 2*dollar, daily))
			if !d.Allowed || d.BudgetRemaining != 3*dollar || d.BudgetScope != limiter.ScopeMember ||
				!d.BudgetResetsAt.Equal(endOfDay) || d.Epoch == 0 {
				t.Fatalf("first hold: %+v", d)
			}
			// Bob's own $5 is tighter than the team's $6 left.
			d = admit(t, l, req("bob", 5*dollar, daily))
			if !d.Allowed || d.BudgetRemaining != 0 || d.BudgetScope != limiter.ScopeMember {
				t.Fatalf("bob's hold: %+v", d)
			}
			// The team has $1 left: the team's budget refuses ada's $2 though hers has $3.
			d = admit(t, l, req("ada", 2*dollar, daily))
			if d.Allowed || d.Reason != limiter.ReasonBudget || d.Scope != limiter.ScopeTeam ||
				d.BudgetScope != limiter.ScopeTeam || d.BudgetRemaining != dollar || !d.BudgetResetsAt.IsZero() || d.TooLarge {
				t.Fatalf("over the team budget: %+v", d)
			}
			// A hold larger than the whole budget can never fit.
			d = admit(t, l, req("cy", 6*dollar, daily))
			if d.Allowed || !d.TooLarge || d.Scope != limiter.ScopeMember || d.RetryAfter != 0 {
				t.Fatalf("hold above the limit: %+v", d)
			}
			// Limit 0 refuses any hold, and admits a free request.
			zero := limiter.Policy{Budget: budget(0, limiter.PeriodTotal)}
			if d := admit(t, l, req("dee", 1, zero)); d.Allowed || !d.TooLarge {
				t.Fatalf("limit 0, hold 1: %+v", d)
			}
			if d := admit(t, l, req("dee", 0, zero)); !d.Allowed || d.BudgetRemaining != 0 {
				t.Fatalf("limit 0, hold 0: %+v", d)
			}
			// No budget at all: -1.
			if d := admit(t, l, limiter.Request{Team: "other", Member: "ada", RequestID: rid(), Hold: dollar}); !d.Allowed || d.BudgetRemaining != -1 {
				t.Fatalf("no budget: %+v", d)
			}
		})
	}
}

// TestOverBudgetMemberIsRefusedEvenForFreeRequests settles a request above its hold,
// leaving the member over budget: every later request is refused, Hold 0 included,
// until the next period.
func TestOverBudgetMemberIsRefusedEvenForFreeRequests(t *testing.T) {
	t.Parallel()
	clk := newClock()
	for name, l := range map[string]limiter.Limiter{
		"Redis": newRedis(t, redistest.Prefix(t), clk.Now),
		"Local": limiter.NewLocal(clk.Now),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rebuildEmpty(t, l, "team", clk.Now)
			p := limiter.Policy{Budget: budget(10*dollar, limiter.PeriodDaily)}
			req := limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: dollar, Lease: time.Minute, MemberPolicy: p}
			d := admit(t, l, req)
			if r := settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: req.RequestID,
				Cost: 12 * dollar, Epoch: d.Epoch}); !r.Applied {
				t.Fatalf("settle: %+v", r)
			}
			for _, hold := range []int64{dollar, 0} {
				req.RequestID, req.Hold = rid(), hold
				if d := admit(t, l, req); d.Allowed || d.Reason != limiter.ReasonBudget || d.BudgetRemaining != 0 {
					t.Fatalf("hold %d over budget: %+v", hold, d)
				}
			}
		})
	}
}
