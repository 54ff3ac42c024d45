package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

const replicas = 3

// correctness offers 4× one member's limit, round-robin over 3 replicas, and
// compares what was admitted with the most the limit allows: once with the
// replicas sharing Redis (the product) and once with limits kept per process.
func correctness(ctx context.Context, c *cluster, o options) (table, error) {
	const limit = 100 // requests per second
	secs := int64(o.duration / time.Second)
	t := table{
		Title:   fmt.Sprintf("Correctness: one member limited to %d req/s, offered %d req/s for %s over %d replicas", limit, 4*limit, o.duration, replicas),
		Columns: []string{"limiter", "algorithm", "sent", "admitted", "ceiling", "admitted/ceiling", "429", "other"},
	}
	var raw []outcome
	for _, shared := range []bool{true, false} {
		for _, algo := range []string{"sliding_window", "token_bucket"} {
			l := store.Limits{RateAlgorithm: algo, RateLimit: limit, RatePeriod: time.Second}
			// Sliding window: at most limit in any 1 s window, and the run's
			// admissions span at most secs+1 windows. Token bucket: a full bucket
			// (burst = limit) plus the refill over the run and the same second of slack.
			ceiling := limit * (secs + 1)
			email := fmt.Sprintf("%s-%t@loadtest.dev", algo, shared)
			key, err := c.member(ctx, email, l)
			if err != nil {
				return t, err
			}
			if err := c.startReplicas(ctx, replicas, shared, nil); err != nil {
				return t, err
			}
			out := attack(email, c.Replicas, key, 4*limit, o.duration)
			c.stopReplicas()
			raw = append(raw, out)
			mode := "Redis (shared)"
			if !shared {
				mode = "per process"
			}
			admitted := out.count(http.StatusOK)
			other := int(out.Sent) - admitted - out.count(http.StatusTooManyRequests)
			t.Rows = append(t.Rows, []string{mode, algo, strconv.FormatUint(out.Sent, 10), strconv.Itoa(admitted),
				strconv.FormatInt(ceiling, 10), fmt.Sprintf("%.3f", float64(admitted)/float64(ceiling)),
				strconv.Itoa(out.count(http.StatusTooManyRequests)), strconv.Itoa(other)})
		}
	}
	t.Raw = raw
	t.Notes = append(t.Notes, "ceiling = limit × (seconds + 1): every 1 s window holds at most the limit, and a run's admissions touch one more window than its length")
	return t, nil
}

// isolation runs a noisy member at 4× its limit beside a quiet member well under
// its own: the quiet member must be served in full, its latency unchanged.
func isolation(ctx context.Context, c *cluster, o options) (table, error) {
	const limit = 100
	l := store.Limits{RateAlgorithm: "token_bucket", RateLimit: limit, RatePeriod: time.Second}
	noisyKey, err := c.member(ctx, "noisy@loadtest.dev", l)
	if err != nil {
		return table{}, err
	}
	quietKey, err := c.member(ctx, "quiet@loadtest.dev", l)
	if err != nil {
		return table{}, err
	}
	if err := c.startReplicas(ctx, replicas, true, nil); err != nil {
		return table{}, err
	}
	defer c.stopReplicas()

	baseline := attack("quiet alone", c.Replicas, quietKey, limit/2, o.duration/3)
	both := attackAll(
		func() outcome { return attack("noisy", c.Replicas, noisyKey, 4*limit, o.duration) },
		func() outcome { return attack("quiet beside noisy", c.Replicas, quietKey, limit/2, o.duration) },
	)
	t := table{
		Title:   fmt.Sprintf("Isolation: noisy member offers %d req/s against a %d req/s limit; quiet member offers %d req/s (limit %d), %d replicas", 4*limit, limit, limit/2, limit, replicas),
		Columns: []string{"member", "offered/s", "sent", "200", "429", "other", "p50", "p99"},
		Raw:     append([]outcome{baseline}, both...),
	}
	for _, out := range t.Raw.([]outcome) {
		ok, refused := out.count(http.StatusOK), out.count(http.StatusTooManyRequests)
		t.Rows = append(t.Rows, []string{out.Name, strconv.Itoa(out.Offered), strconv.FormatUint(out.Sent, 10),
			strconv.Itoa(ok), strconv.Itoa(refused), strconv.Itoa(int(out.Sent) - ok - refused), ms(out.P50), ms(out.P99)})
	}
	quiet := both[1]
	t.Notes = append(t.Notes, fmt.Sprintf("quiet member served %d of %d (%.2f%%); p99 %s beside the noisy member vs %s alone",
		quiet.count(http.StatusOK), quiet.Sent, 100*float64(quiet.count(http.StatusOK))/float64(max(quiet.Sent, 1)), ms(quiet.P99), ms(baseline.P99)))
	return t, nil
}
