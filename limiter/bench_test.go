package limiter_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redisstats"
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
// per Settle, once the scripts are cached in Redis, with and without budget and TPM.
func TestAdmitIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: testTimeout})
	ctx := context.Background()
	req := benchRequest()
	admit(t, l, req)
	if err := release(ctx, l, req.Team, req.Member, "warm-up"); err != nil {
		t.Fatal(err)
	}
	rebuildEmpty(t, l, req.Team, nil)
	budgeted := budgetRequest()
	const n = 50
	trips.n.Store(0)
	for i := range n {
		r := req
		if i%2 == 1 {
			r = budgeted
		}
		r.RequestID = rid()
		d := admit(t, l, r)
		if !d.Allowed {
			t.Fatalf("%+v", d)
		}
		settle(t, l, limiter.Settlement{Team: r.Team, Member: r.Member, RequestID: r.RequestID, Cost: r.Hold / 2, Tokens: r.Tokens, Epoch: d.Epoch})
	}
	if got := trips.n.Load(); got != 2*n {
		t.Fatalf("%d round trips for %d Admit+Settle, want %d", got, n, 2*n)
	}
}

// budgetRequest is a paid request: BenchmarkAdmitTypical's limits plus a member daily
// budget, a member TPM limit and a team monthly budget, none of them ever refusing.
func budgetRequest() limiter.Request {
	return limiter.Request{Team: "team", Member: "ada", KeyID: "key", Lease: time.Minute, Hold: 5000, Tokens: 2000,
		Meta: "member=7 key=k1",
		MemberPolicy: limiter.Policy{Rate: tokenBucket(1<<30, time.Second, 0), Concurrency: 64,
			Budget: budget(1<<50, limiter.PeriodDaily), TokensPerMinute: limiter.MaxTokens},
		TeamPolicy: limiter.Policy{Budget: budget(1<<51, limiter.PeriodMonthly)}}
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

// privateRedis is a client of a redis-server of the benchmark's own, so that its
// INFO commandstats counts the benchmark's calls and nothing else.
func privateRedis(b *testing.B) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redistest.StartServer(b).Addr()})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// reportScripts, deferred before the timed loop, reports what the server says it
// spent per iteration inside scripts (INFO commandstats usec, the figure the
// gateway's "Redis time per request" is) and how many script calls that took.
func reportScripts(b *testing.B, c *redis.Client) func() {
	ctx := context.Background()
	calls0, usec0 := redisstats.Scripts(ctx, c)
	return func() {
		calls1, usec1 := redisstats.Scripts(ctx, c)
		b.ReportMetric(float64(usec1-usec0)/float64(b.N), "redis-µs/op")
		b.ReportMetric(float64(calls1-calls0)/float64(b.N), "scripts/op")
	}
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
	}, func() error { return release(ctx, l, req.Team, req.Member, req.RequestID) })
}

// BenchmarkAdmitBudget is BenchmarkAdmitTypical for a paid request: the same limits
// plus budgets and TPM, each request settled (untimed) at half its hold.
func BenchmarkAdmitBudget(b *testing.B) {
	c := privateRedis(b)
	l := limiter.NewRedis(c, limiter.RedisOptions{Prefix: "bench:", Timeout: time.Second})
	req := budgetRequest()
	rebuildEmpty(b, l, req.Team, nil)
	ctx := context.Background()
	var epoch int64
	defer reportScripts(b, c)()
	benchLatency(b, func(ctx context.Context) error {
		req.RequestID = rid()
		d, err := l.Admit(ctx, req)
		epoch = d.Epoch
		return err
	}, func() error {
		_, err := l.Settle(ctx, limiter.Settlement{Team: req.Team, Member: req.Member, RequestID: req.RequestID,
			Cost: req.Hold / 2, Tokens: req.Tokens / 2, Epoch: epoch})
		return err
	})
}

// BenchmarkAdmitCarryingSettle is BenchmarkAdmitBudget as the gateway runs it:
// each ADMIT carries the previous request's settle (AdmitAfter), so one script
// call admits and settles. Its p50 beside BenchmarkAdmitBudget's is what the
// settle adds to the call it rides in.
func BenchmarkAdmitCarryingSettle(b *testing.B) {
	c := privateRedis(b)
	l := limiter.NewRedis(c, limiter.RedisOptions{Prefix: "bench:", Timeout: time.Second})
	req := budgetRequest()
	rebuildEmpty(b, l, req.Team, nil)
	var prev []limiter.Settlement
	defer reportScripts(b, c)()
	benchLatency(b, func(ctx context.Context) error {
		req.RequestID = rid()
		d, errs, err := l.AdmitAfter(ctx, prev, req)
		if err == nil && len(errs) > 0 {
			err = errs[0]
		}
		prev = []limiter.Settlement{{Team: req.Team, Member: req.Member, RequestID: req.RequestID,
			Cost: req.Hold / 2, Tokens: req.Tokens / 2, Epoch: d.Epoch}}
		return err
	})
}

// BenchmarkAdmitIdleRoom is BenchmarkAdmit for a request the waiting room may
// hold, with the room empty: it must cost no more Redis calls than BenchmarkAdmit.
func BenchmarkAdmitIdleRoom(b *testing.B) {
	l := limiter.NewRedis(redistest.Client(b), limiter.RedisOptions{Prefix: redistest.Prefix(b), Timeout: time.Second})
	req := benchRequest()
	req.QueueWait, req.Weight = 3*time.Second, 8
	benchLatency(b, func(ctx context.Context) error {
		req.RequestID = rid()
		_, err := l.Admit(ctx, req)
		return err
	})
}
