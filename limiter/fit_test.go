package limiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestFitHoldsWhatIsLeft: with a fit floor, a request whose hold does not fit is
// admitted holding exactly what its tightest budget (member or team) has left, the
// next one is refused once less than the floor is left, and a request without a
// floor is refused as before. Redis and Local agree at every step.
func TestFitHoldsWhatIsLeft(t *testing.T) {
	t.Parallel()
	for _, l := range []limiter.Limiter{newRedis(t, redistest.Prefix(t), nil), limiter.NewLocal(time.Now)} {
		rebuildEmpty(t, l, "team", nil)
		req := func(hold, floor int64) limiter.Request {
			return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: hold, FitFloor: floor,
				Lease: time.Minute, MemberPolicy: limiter.Policy{Budget: budget(5*dollar, limiter.PeriodMonthly)},
				TeamPolicy: limiter.Policy{Budget: budget(4*dollar, limiter.PeriodMonthly)}}
		}
		// $2.70 each: the first fits whole; the second, without a floor, is refused.
		if d := admit(t, l, req(2_700_000, 100_000)); !d.Allowed || d.Fitted != 0 || d.BudgetRemaining != 1_300_000 {
			t.Fatalf("%T first: %+v", l, d)
		}
		if d := admit(t, l, req(2_700_000, 0)); d.Allowed || d.Reason != limiter.ReasonBudget {
			t.Fatalf("%T without a floor: %+v, want a budget refusal", l, d)
		}
		d := admit(t, l, req(2_700_000, 100_000))
		if !d.Allowed || d.Fitted != 1_300_000 || d.BudgetRemaining != 0 || d.BudgetScope != limiter.ScopeTeam {
			t.Fatalf("%T fitted: %+v, want the team's $1.30 held", l, d)
		}
		if d := admit(t, l, req(2_700_000, 1)); d.Allowed || d.Reason != limiter.ReasonBudget || d.TooLarge {
			t.Fatalf("%T nothing left: %+v", l, d)
		}
		if d := admit(t, l, req(6*dollar, 5*dollar)); d.Allowed || !d.TooLarge {
			t.Fatalf("%T floor above the team's limit: %+v, want too large", l, d)
		}
	}
}

// TestFitIsExactAcrossReplicas races 64 fitted requests over 3 limiter instances
// against a $10 budget: the holds placed add up to exactly $10, never more.
func TestFitIsExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	const replicas, requests = 3, 64
	prefix := redistest.Prefix(t)
	ls := make([]*limiter.Redis, replicas)
	for i := range ls {
		ls[i] = newRedis(t, prefix, nil)
	}
	rebuildEmpty(t, ls[0], "team", nil)
	var held atomic.Int64
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			req := limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Hold: 2_700_000, FitFloor: 10_000,
				Lease: time.Minute, MemberPolicy: limiter.Policy{Budget: budget(10*dollar, limiter.PeriodMonthly)}}
			d, err := ls[i%replicas].Admit(context.Background(), req)
			switch {
			case err != nil:
				t.Error(err)
			case d.Allowed && d.Fitted > 0:
				held.Add(d.Fitted)
			case d.Allowed:
				held.Add(req.Hold)
			case d.Reason != limiter.ReasonBudget:
				t.Errorf("refused with %+v", d)
			}
		})
	}
	wg.Wait()
	if held.Load() != 10*dollar {
		t.Fatalf("held %d µ$ in all, want exactly the $10 budget", held.Load())
	}
}
