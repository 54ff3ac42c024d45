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

// TestTPMIsExactAcrossReplicas sends 3 instances × 20,000 concurrent requests of 50
// tokens against a member TPM bucket that fits 2,000 of them, on a frozen clock (no
// refill): exactly 2,000 are admitted, and no request fails.
func TestTPMIsExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	const replicas, perReplica, workers, fits, tokens = 3, 20_000, 32, 2_000, 50
	clk := newClock()
	prefix := redistest.Prefix(t)
	ls := make([]*limiter.Redis, replicas)
	for i := range ls {
		ls[i] = newRedis(t, prefix, clk.Now)
	}
	rebuildEmpty(t, ls[0], "team", clk.Now)
	var admitted, refused, errs atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		jobs := make(chan limiter.Request)
		for range workers {
			wg.Go(func() {
				for req := range jobs {
					d, err := l.Admit(context.Background(), req)
					switch {
					case err != nil:
						errs.Add(1)
					case d.Allowed:
						admitted.Add(1)
					case d.Reason == limiter.ReasonTPM && d.RetryAfter > 0:
						refused.Add(1)
					default:
						errs.Add(1)
					}
				}
			})
		}
		wg.Go(func() {
			defer close(jobs)
			for range perReplica {
				jobs <- limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Tokens: tokens, Lease: time.Minute,
					MemberPolicy: limiter.Policy{TokensPerMinute: fits * tokens}}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != fits || errs.Load() != 0 || refused.Load() != replicas*perReplica-fits {
		t.Fatalf("admitted %d, refused %d, errors %d of %d; want exactly %d admitted and no error",
			admitted.Load(), refused.Load(), errs.Load(), replicas*perReplica, fits)
	}
}

// TestTPMNumbers checks the token bucket's figures and waits, on Redis and on Local.
func TestTPMNumbers(t *testing.T) {
	t.Parallel()
	clk := newClock()
	for name, l := range map[string]limiter.Limiter{
		"Redis": newRedis(t, redistest.Prefix(t), clk.Now),
		"Local": limiter.NewLocal(clk.Now),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rebuildEmpty(t, l, "team", clk.Now)
			req := func(tokens int64) limiter.Request {
				return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Tokens: tokens, Lease: time.Minute,
					MemberPolicy: limiter.Policy{TokensPerMinute: 600}} // 10 tokens a second
			}
			if d := admit(t, l, req(500)); !d.Allowed || d.Epoch == 0 {
				t.Fatalf("500 of 600: %+v", d)
			}
			d := admit(t, l, req(150))
			want := limiter.Decision{Reason: limiter.ReasonTPM, Scope: limiter.ScopeMember, Limit: 600, Remaining: 100,
				Reset: 50 * time.Second, RetryAfter: 5 * time.Second, BudgetRemaining: -1, At: clk.Now().UTC()}
			if !sameDecision(d, want) {
				t.Fatalf("150 with 100 left:\ngot  %+v\nwant %+v", d, want)
			}
			if d := admit(t, l, req(601)); d.Allowed || !d.TooLarge || d.RetryAfter != 0 {
				t.Fatalf("above the capacity: %+v", d)
			}
			clk.Advance(5*time.Second - time.Microsecond)
			if d := admit(t, l, req(150)); d.Allowed || d.RetryAfter != time.Microsecond {
				t.Fatalf("1µs early: %+v", d)
			}
			clk.Advance(time.Microsecond)
			if d := admit(t, l, req(150)); !d.Allowed {
				t.Fatalf("at RetryAfter: %+v", d)
			}
		})
	}
}
