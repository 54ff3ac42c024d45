package limiter_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestExpiredHoldsAreSwept has a gateway place 5,000 holds and die without settling
// any. Once their leases end, the surviving gateway's ordinary admissions sweep them,
// at most 100 per call: each is charged in full, reported once with its meta, its
// tokens stay spent, and a late settle changes nothing. It logs how many admissions
// and how long the sweep took.
func TestExpiredHoldsAreSwept(t *testing.T) {
	t.Parallel()
	const abandoned, members, hold, tokens, lease = 5000, 5, 1000, 100, time.Second
	clk := newClock()
	prefix := redistest.Prefix(t)
	killed, survivor := newRedis(t, prefix, clk.Now), newRedis(t, prefix, clk.Now)
	rebuildEmpty(t, survivor, "team", clk.Now)
	policy := func(r *limiter.Request) {
		r.MemberPolicy = limiter.Policy{Budget: budget(10*dollar, limiter.PeriodDaily)}
		r.TeamPolicy = limiter.Policy{Budget: budget(100*dollar, limiter.PeriodMonthly), TokensPerMinute: 1_000_000}
	}

	var wg sync.WaitGroup
	ids := make(chan string, abandoned)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < abandoned; i += 16 {
				req := limiter.Request{Team: "team", Member: fmt.Sprintf("m%d", i%members), RequestID: rid(),
					Hold: hold, Tokens: tokens, Lease: lease, Meta: fmt.Sprintf("meta-%d", i)}
				policy(&req)
				if d, err := killed.Admit(context.Background(), req); err != nil || !d.Allowed {
					t.Errorf("abandoned hold %d: %+v, %v", i, d, err)
					return
				}
				ids <- req.RequestID
			}
		})
	}
	wg.Wait()
	close(ids)
	if t.Failed() {
		return
	}
	// 5,000 × 100 tokens of 1,000,000 are reserved; 500,000 are left.
	probe := func(n int64) limiter.Decision {
		req := limiter.Request{Team: "team", Member: "probe", RequestID: rid(), Tokens: n, Lease: lease}
		policy(&req)
		return admit(t, survivor, req)
	}
	if d := probe(500_001); d.Allowed || d.Reason != limiter.ReasonTPM || len(d.Expired) != 0 {
		t.Fatalf("before the leases end: %+v", d)
	}

	clk.Advance(lease) // the killed gateway's leases end; the TPM bucket refills 16,666 tokens
	want := map[string]bool{}
	var late string
	for id := range ids {
		want[id], late = true, id
	}
	start := time.Now()
	calls := 0
	for len(want) > 0 {
		req := limiter.Request{Team: "team", Member: "m0", RequestID: rid()}
		policy(&req)
		d := admit(t, survivor, req)
		calls++
		if len(d.Expired) == 0 || len(d.Expired) > 100 {
			t.Fatalf("call %d swept %d holds with %d left", calls, len(d.Expired), len(want))
		}
		for _, e := range d.Expired {
			if !want[e.RequestID] || e.Hold != hold || e.Tokens != tokens || len(e.Meta) < 6 {
				t.Fatalf("unexpected expired hold %+v", e)
			}
			delete(want, e.RequestID)
		}
	}
	took := time.Since(start)
	t.Logf("%d abandoned holds swept by %d admissions in %s", abandoned, calls, took)
	if calls != abandoned/100 {
		t.Errorf("%d admissions swept %d holds, want %d", calls, abandoned, abandoned/100)
	}

	// Charged in full: m0 spent $1 of its $10 (1,000 holds of $0.001), the team $5 of $100.
	req := limiter.Request{Team: "team", Member: "m0", RequestID: rid()}
	policy(&req)
	if d := admit(t, survivor, req); d.BudgetRemaining != 9*dollar || d.BudgetScope != limiter.ScopeMember || len(d.Expired) != 0 {
		t.Fatalf("after the sweep: %+v, want $9 left for m0", d)
	}
	req = limiter.Request{Team: "team", Member: "m9", RequestID: rid(), MemberPolicy: limiter.Policy{},
		TeamPolicy: limiter.Policy{Budget: budget(100*dollar, limiter.PeriodMonthly)}}
	if d := admit(t, survivor, req); d.BudgetRemaining != 95*dollar {
		t.Fatalf("after the sweep: %+v, want $95 left for the team", d)
	}
	// Tokens stay spent: 500,000 + the refill of one second, nothing returned.
	if d := probe(516_667); d.Allowed {
		t.Fatalf("tokens came back: %+v", d)
	}
	if d := probe(516_666); !d.Allowed {
		t.Fatalf("tokens: %+v", d)
	}
	// A settle that arrives after the sweep is known and changes nothing.
	if r := settle(t, survivor, limiter.Settlement{Team: "team", Member: "m0", RequestID: late, Epoch: 1}); r.Applied || !r.Known {
		t.Fatalf("settle after the sweep: %+v, want known and not applied", r)
	}
}
