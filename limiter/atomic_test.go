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

// TestAdmissionIsExactAcrossReplicas races 3 limiter instances (3 connection pools,
// like 3 gateway replicas) × 50 goroutines × 10 attempts against one limit of 100
// that cannot refill during the test: exactly 100 are admitted.
func TestAdmissionIsExactAcrossReplicas(t *testing.T) {
	t.Parallel()
	const replicas, workers, attempts, limit = 3, 50, 10, 100
	day := 24 * time.Hour
	tests := []struct {
		name   string
		member func(i int) string
		policy func(r *limiter.Request)
	}{
		{"MemberTokenBucket", func(int) string { return "ada" },
			func(r *limiter.Request) { r.MemberPolicy.Rate = tokenBucket(limit, day, 0) }},
		{"MemberSlidingWindow", func(int) string { return "ada" },
			func(r *limiter.Request) { r.MemberPolicy.Rate = slidingWindow(limit, day) }},
		{"TeamTokenBucket", func(i int) string { return fmt.Sprintf("member-%d", i%7) },
			func(r *limiter.Request) {
				r.MemberPolicy.Rate = tokenBucket(1000, day, 0)
				r.TeamPolicy.Rate = tokenBucket(limit, day, 0)
			}},
		{"TeamSlidingWindow", func(i int) string { return fmt.Sprintf("member-%d", i%7) },
			func(r *limiter.Request) { r.TeamPolicy.Rate = slidingWindow(limit, day) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			var admitted, refused atomic.Int64
			var wg sync.WaitGroup
			for range replicas {
				l := newRedis(t, prefix, nil)
				for w := range workers {
					wg.Go(func() {
						for i := range attempts {
							req := limiter.Request{Team: "team", Member: tt.member(w*attempts + i), RequestID: rid()}
							tt.policy(&req)
							d, err := l.Admit(context.Background(), req)
							switch {
							case err != nil:
								t.Error(err)
								return
							case d.Allowed:
								admitted.Add(1)
							case d.Reason == limiter.ReasonRate:
								refused.Add(1)
							default:
								t.Errorf("refused with %+v", d)
							}
						}
					})
				}
			}
			wg.Wait()
			if admitted.Load() != limit || refused.Load() != replicas*workers*attempts-limit {
				t.Fatalf("admitted %d, refused %d of %d; want exactly %d admitted",
					admitted.Load(), refused.Load(), replicas*workers*attempts, limit)
			}
		})
	}
}
