package limiter_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// benchRequest carries every check ADMIT has: member and team rate limits (one of
// each algorithm) and concurrency caps, none of them ever refusing.
func benchRequest() limiter.Request {
	return limiter.Request{Team: "team", Member: "ada", KeyID: "key", Lease: time.Second,
		MemberPolicy: limiter.Policy{Rate: tokenBucket(1<<30, time.Second, 0), Concurrency: 1 << 30},
		TeamPolicy:   limiter.Policy{Rate: slidingWindow(1<<30, time.Millisecond), Concurrency: 1 << 30}}
}

// TestAdmitIsOneRoundTrip counts what the client sends: one EVALSHA per Admit and one
// per Release, once the script is cached in Redis.
func TestAdmitIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: testTimeout})
	ctx := context.Background()
	req := benchRequest()
	admit(t, l, req)
	if err := l.Release(ctx, req.Team, req.Member, "warm-up"); err != nil {
		t.Fatal(err)
	}
	const n = 50
	trips.n.Store(0)
	for range n {
		req.RequestID = rid()
		if d := admit(t, l, req); !d.Allowed {
			t.Fatalf("%+v", d)
		}
		if err := l.Release(ctx, req.Team, req.Member, req.RequestID); err != nil {
			t.Fatal(err)
		}
	}
	if got := trips.n.Load(); got != 2*n {
		t.Fatalf("%d round trips for %d Admit+Release, want %d", got, n, 2*n)
	}
}

// BenchmarkAdmit and BenchmarkPing run sequentially on one client, so the difference
// between their p50s is the cost of the script over a bare round trip.
func BenchmarkAdmit(b *testing.B) {
	l := limiter.NewRedis(redistest.Client(b), limiter.RedisOptions{Prefix: redistest.Prefix(b), Timeout: time.Second})
	req := benchRequest()
	benchLatency(b, func(ctx context.Context) error {
		req.RequestID = rid()
		_, err := l.Admit(ctx, req)
		return err
	})
}

func BenchmarkPing(b *testing.B) {
	c := redistest.Client(b)
	benchLatency(b, func(ctx context.Context) error { return c.Ping(ctx).Err() })
}

// benchLatency times each call and reports p50 and p99 next to ns/op; after, if
// given, runs untimed after each call.
func benchLatency(b *testing.B, call func(context.Context) error, after ...func() error) {
	ctx := context.Background()
	if err := call(ctx); err != nil { // loads the script
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		for _, f := range after {
			b.StopTimer()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkAdmitTypical is the common configuration: a member token bucket and a
// concurrency cap, with each request's slot released as a gateway would.
func BenchmarkAdmitTypical(b *testing.B) {
	l := limiter.NewRedis(redistest.Client(b), limiter.RedisOptions{Prefix: redistest.Prefix(b), Timeout: time.Second})
	req := limiter.Request{Team: "team", Member: "ada", KeyID: "key", Lease: time.Minute,
		MemberPolicy: limiter.Policy{Rate: tokenBucket(1<<30, time.Second, 0), Concurrency: 64}}
	ctx := context.Background()
	benchLatency(b, func(ctx context.Context) error {
		req.RequestID = rid()
		_, err := l.Admit(ctx, req)
		return err
	}, func() error { return l.Release(ctx, req.Team, req.Member, req.RequestID) })
}
