package limiter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestConcurrencyCap admits N+k at once against a cap of N, then checks that slots
// come back on Settle (once, however often it is called) and, for a holder that
// crashed without releasing, when the lease ends.
func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	const capacity, extra, lease = 5, 3, 30 * time.Second
	ctx := context.Background()
	clk := newClock()
	prefix := redistest.Prefix(t)
	replicas := []*limiter.Redis{newRedis(t, prefix, clk.Now), newRedis(t, prefix, clk.Now)}
	tests := []struct {
		name   string
		member func(i int) string
		policy func(r *limiter.Request)
	}{
		{"Member", func(int) string { return "ada" },
			func(r *limiter.Request) { r.MemberPolicy.Concurrency = capacity }},
		{"Team", func(i int) string { return []string{"ada", "bob", "cy"}[i%3] },
			func(r *limiter.Request) { r.MemberPolicy.Concurrency = 10; r.TeamPolicy.Concurrency = capacity }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request := func(i int) limiter.Request {
				r := limiter.Request{Team: "team-" + tt.name, Member: tt.member(i), RequestID: rid(), Lease: lease}
				tt.policy(&r)
				return r
			}
			reqs := make([]limiter.Request, capacity+extra)
			decisions := make([]limiter.Decision, len(reqs))
			var wg sync.WaitGroup
			for i := range reqs {
				reqs[i] = request(i)
				wg.Go(func() { decisions[i] = admit(t, replicas[i%2], reqs[i]) })
			}
			wg.Wait()
			var held []limiter.Request
			for i, d := range decisions {
				switch {
				case d.Allowed:
					held = append(held, reqs[i])
				case d.Reason != limiter.ReasonConcurrency || d.RetryAfter <= 0 || d.RetryAfter > time.Second:
					t.Fatalf("refused with %+v, want concurrency with a RetryAfter up to 1s", d)
				}
			}
			if len(held) != capacity {
				t.Fatalf("%d admitted, want %d", len(held), capacity)
			}

			// Release the first slot three times, from either replica: one slot back.
			for i := range 3 {
				if err := release(ctx, replicas[i%2], held[0].Team, held[0].Member, held[0].RequestID); err != nil {
					t.Fatal(err)
				}
			}
			if d := admit(t, replicas[0], request(0)); !d.Allowed {
				t.Fatalf("after release: %+v, want admitted", d)
			}
			if d := admit(t, replicas[1], request(1)); d.Reason != limiter.ReasonConcurrency {
				t.Fatalf("after one release and one admit: %+v, want concurrency", d)
			}

			// The holders crash: nothing is released, the leases run out.
			clk.Advance(lease - time.Microsecond)
			if d := admit(t, replicas[0], request(2)); d.Allowed {
				t.Fatalf("1µs before the leases end: %+v, want refused", d)
			}
			clk.Advance(time.Microsecond)
			for i := range capacity {
				if d := admit(t, replicas[i%2], request(i)); !d.Allowed {
					t.Fatalf("after the leases ended, admit %d: %+v", i, d)
				}
			}
		})
	}
}
