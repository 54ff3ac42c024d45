package app_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

func setLimits(t *testing.T, f *fixture, l store.Limits) {
	t.Helper()
	if l.RateAlgorithm == "" {
		l.RateAlgorithm = "token_bucket"
	}
	if l.RatePeriod == 0 {
		l.RatePeriod = time.Hour
	}
	_, err := f.st.SetMemberLimits(context.Background(), store.ActorCLI, f.team.ID, f.member.ID, l)
	must(t, err)
}

// waitForBudget waits until the member's budget has reached gw's config snapshot.
func waitForBudget(t *testing.T, gw *apptest.Replica, f *fixture) {
	t.Helper()
	eventually(t, 10*time.Second, "budget reaches the replica", func() bool {
		m, _ := gw.App.Snapshots.Current().Member(f.member.ID)
		return m.Limits.Budget != nil
	})
}

// TestRateLimitRefusal: a lowered limit applies from the next request once the
// change reaches the replica; past it the SDK gets its own 429 with Retry-After,
// every response carries the X-RateLimit headers, and nothing refused is forwarded.
func TestRateLimitRefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{RateLimit: 5})
	waitForRate(t, f, 5)
	if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusOK || r.header.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("first request: %d, remaining %q", r.status, r.header.Get("X-RateLimit-Remaining"))
	}
	setLimits(t, f, store.Limits{RateLimit: 2})
	waitForRate(t, f, 2)
	before := len(f.mock.Records())
	for i := range 2 {
		if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusOK || r.header.Get("X-RateLimit-Limit") != "2" {
			t.Fatalf("request %d under the lowered limit: %d, limit header %q", i, r.status, r.header.Get("X-RateLimit-Limit"))
		}
	}
	last := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
	if last.status != http.StatusTooManyRequests {
		t.Fatalf("third request under the lowered limit: %d, want 429", last.status)
	}
	typ, msg := errorShape(t, "anthropic", last.body)
	retry, _ := strconv.Atoi(last.header.Get("Retry-After"))
	retryMS, _ := strconv.Atoi(last.header.Get("Retry-After-Ms"))
	// One token of 2 per hour comes back after 30 minutes.
	if typ != "rate_limit_error" || retry < 1700 || retry > 1800 || retryMS < (retry-1)*1000 ||
		last.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("429: type %q msg %q Retry-After %q retry-after-ms %q remaining %q", typ, msg,
			last.header.Get("Retry-After"), last.header.Get("Retry-After-Ms"), last.header.Get("X-RateLimit-Remaining"))
	}

	client := anthropicClient(f, f.key)
	_, err := client.Messages.New(context.Background(), anthropicParams)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("SDK: %v, want a 429 *anthropic.Error", err)
	}
	if got := len(f.mock.Records()) - before; got != 2 {
		t.Fatalf("%d requests reached the upstream, want the 2 admitted", got)
	}
}

func waitForRate(t *testing.T, f *fixture, limit int64) {
	t.Helper()
	eventually(t, 10*time.Second, "limit reaches the replica", func() bool {
		m, _ := f.gw.App.Snapshots.Current().Member(f.member.ID)
		return m.Limits.Rate != nil && m.Limits.Rate.Limit == limit
	})
}

// TestConcurrencyCap: N+k slow requests at once → exactly N reach the upstream,
// k are refused with 429 at once, and the slots come back after the responses.
func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const capacity, extra = 3, 4
	setLimits(t, f, store.Limits{Concurrency: capacity})
	eventually(t, 10*time.Second, "cap reaches the replica", func() bool {
		m, _ := f.gw.App.Snapshots.Current().Member(f.member.ID)
		return m.Limits.Concurrency == capacity
	})
	statuses := make(chan int, capacity+extra)
	var wg sync.WaitGroup
	for range capacity + extra {
		wg.Go(func() {
			req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
			req.Header.Set("X-Mock-Latency-Ms", "800")
			statuses <- do(t, req).status
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != capacity || counts[http.StatusTooManyRequests] != extra {
		t.Fatalf("statuses %v, want %d×200 and %d×429", counts, capacity, extra)
	}
	for range capacity + 1 {
		if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusOK {
			t.Fatalf("after the slow requests finished: %d, want the slots back", r.status)
		}
	}
}

// TestRevocationBindsThroughRedis: a revocation or cut-off written to Redis is
// refused on another replica at its very next request, before any snapshot
// reload (nothing is written to Postgres here at all).
func TestRevocationBindsThroughRedis(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := f.replica(t)
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("warm-up: %d", r.status)
	}
	lim := limiter.NewRedis(redistest.Client(t), limiter.RedisOptions{Prefix: f.redisPrefix})
	team := strconv.FormatInt(f.team.ID, 10)
	must(t, lim.SetKeyRevoked(context.Background(), team, f.keyID, true))
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusUnauthorized {
		t.Fatalf("next request after revocation in Redis: %d, want 401", r.status)
	}
	must(t, lim.SetKeyRevoked(context.Background(), team, f.keyID, false))
	must(t, lim.SetMemberCutOff(context.Background(), team, strconv.FormatInt(f.member.ID, 10), true))
	if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusForbidden {
		t.Fatalf("next request after cut-off in Redis: %d, want 403", r.status)
	}
}

// TestRedisDown: with Redis gone, a fail-closed route answers 503 in the
// provider's shape within the admission timeout, without calling the upstream;
// a fail-open route keeps serving from the replica's own share of the limit.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Preset: "anthropic",
		Prefix: "/open", UpstreamURL: f.mockURL, FailMode: "open"})
	must(t, err)
	setLimits(t, f, store.Limits{RateLimit: 4})
	srv := redistest.StartServer(t)
	gw := apptest.Start(t, f.dbURL, map[string]string{
		"ANTHROPIC_API_KEY": anthropicSecret, "REDIS_URL": srv.URL(), "REDIS_TIMEOUT": "100ms", "GATEWAY_REPLICAS": "2",
	})
	if r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("with Redis up: %d", r.status)
	}
	srv.Kill()
	before := len(f.mock.Records())
	start := time.Now()
	r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
	took := time.Since(start)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || len(f.mock.Records()) != before {
		t.Fatalf("fail-closed with Redis down: %d %s", r.status, r.body)
	}
	errorShape(t, "anthropic", r.body)
	if took > 2*time.Second {
		t.Fatalf("fail-closed refusal took %s", took)
	}
	t.Logf("fail-closed refusal with Redis down took %s (REDIS_TIMEOUT 100ms)", took)

	allowed := 0
	for range 4 {
		req := anthropicRequest(t, gw.URL, f.key, messagesBody)
		req.URL.Path = "/open/v1/messages"
		if do(t, req).status == http.StatusOK {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("fail-open admitted %d of 4, want the replica's share 4/2 = 2", allowed)
	}
	srv.Start()
	// The pool dials again once its backoff after the failed dials has passed:
	// on a busy machine the first request may still find it waiting.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back for 5 s: %d %s", r.status, r.body)
		}
	}
}
