package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/proxy"
)

// limitedUpstream is a mock provider whose account allows rpm requests a
// minute (0: any number), and its URL; wrap may change each answer's headers
// before the mock writes them.
func limitedUpstream(t *testing.T, rpm int, wrap func(http.Header)) (*mock.Server, string) {
	t.Helper()
	m := mock.New(mock.Options{RequestsPerMinute: rpm, OutputTokens: 100})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap != nil {
			wrap(w.Header())
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// addLimitedRoute adds an Anthropic route at prefix to upstream and the extra
// targets, before the replicas that serve it start.
func addLimitedRoute(t *testing.T, f *fixture, prefix, upstream string, extra []store.RouteTarget) {
	t.Helper()
	ctx := context.Background()
	_, err := f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Preset: "anthropic", Prefix: prefix, UpstreamURL: upstream})
	must(t, err)
	for _, tg := range extra {
		must(t, f.st.AddRouteTarget(ctx, store.ActorCLI, f.team.ID, prefix, tg))
	}
}

func upstreams(m *mock.Server) (sent, refused int) {
	for _, r := range m.Records() {
		sent++
		if r.Status == http.StatusTooManyRequests {
			refused++
		}
	}
	return sent, refused
}

func callPrefix(t *testing.T, baseURL, key, prefix string) response {
	t.Helper()
	req := anthropicRequest(t, baseURL, key, messagesBody)
	req.URL.Path = prefix + "/v1/messages"
	return do(t, req)
}

// TestProviderLimitHeldOnEveryReplica: a provider account that says it has
// no requests left for a minute, learned on replica A, is respected on
// replica B, which never sent it anything: both answer a provider-shaped 429
// with Retry-After themselves instead of sending the request, charge nothing,
// and leave no hold (the member's one concurrency slot is free again).
func TestProviderLimitHeldOnEveryReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Concurrency: 1, Budget: dollarsPtr(1_000_000), BudgetPeriod: "total"})
	limited, url := limitedUpstream(t, 1, nil)
	addLimitedRoute(t, f, "/limited", url, nil)
	a, b := f.replica(t), f.replica(t)
	plainOK(t, f, a.URL, b.URL)
	if r := callOwnSlot(t, f, a.URL, "/limited"); r.status != http.StatusOK {
		t.Fatalf("first request: %d %s", r.status, r.body)
	}
	var refusals []response
	refusals = append(refusals, callOwnSlot(t, f, a.URL, "/limited"))
	eventually(t, 5*time.Second, "replica B learns the exhausted account", func() bool {
		r := callOwnSlot(t, f, b.URL, "/limited")
		if r.status == http.StatusTooManyRequests && strings.Contains(r.body, "did not send") {
			refusals = append(refusals, r)
			return true
		}
		return false
	})
	for _, r := range refusals {
		typ, msg := errorShape(t, "anthropic", r.body)
		after, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != http.StatusTooManyRequests || typ != "rate_limit_error" || after < 30 || after > 60 ||
			r.header.Get("Retry-After-Ms") == "" || !strings.Contains(msg, "provider account's rate limit") {
			t.Errorf("refusal: %d %s %q Retry-After %q", r.status, typ, msg, r.header.Get("Retry-After"))
		}
	}
	// B may have sent before it learned; A, which knew, never did.
	if sent, refused := upstreams(limited); refused > sent-1 || sent-refused != 1 {
		t.Errorf("the limited account saw %d requests, %d refused; want one admitted", sent, refused)
	}
	// The slot is free (concurrency 1) and nothing was charged for the refusals.
	plainOK(t, f, a.URL, b.URL)
	time.Sleep(300 * time.Millisecond) // past a ledger flush
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	refusedRows := 0
	for _, row := range rows {
		if row.HTTPStatus == 0 {
			refusedRows++
			if row.Status != proxy.LedgerReleased || row.CostMicros != 0 {
				t.Errorf("a request the gateway did not send: ledger %s, charged %d", row.Status, row.CostMicros)
			}
		}
	}
	if refusedRows < len(refusals) {
		t.Errorf("%d ledger rows of unsent requests, want %d", refusedRows, len(refusals))
	}
}

// callOwnSlot is callPrefix for a member whose one concurrency slot comes
// back when the previous request's settle has run, just after its response:
// a refusal for the slot is repeated, for up to 3s. A hold left behind would
// keep the slot taken for the whole 15-minute lease.
func callOwnSlot(t *testing.T, f *fixture, baseURL, prefix string) response {
	t.Helper()
	var got response
	eventually(t, 3*time.Second, "the member's slot is free on "+baseURL, func() bool {
		got = callPrefix(t, baseURL, f.key, prefix)
		return !strings.Contains(got.body, "requests in flight")
	})
	return got
}

// plainOK sends one request to the plain route through each replica.
func plainOK(t *testing.T, f *fixture, replicas ...string) {
	t.Helper()
	for _, r := range replicas {
		if got := callOwnSlot(t, f, r, "/anthropic"); got.status != http.StatusOK {
			t.Fatalf("plain route: %d %s", got.status, got.body)
		}
	}
}

// TestProviderLimitSecondTargetTakesTraffic: with one of the route's two
// accounts exhausted, the route's traffic goes to the other: no request is
// sent into the known 429.
func TestProviderLimitSecondTargetTakesTraffic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	limited, limitedURL := limitedUpstream(t, 1, nil)
	_, roomyURL := limitedUpstream(t, 6000, nil)
	addLimitedRoute(t, f, "/pair", limitedURL, []store.RouteTarget{{UpstreamURL: roomyURL, CredentialEnv: "TOLLGATE_CREDENTIAL_SECOND"}})
	gw := f.replicaWith(t, map[string]string{"TOLLGATE_CREDENTIAL_SECOND": "sk-ant-second"})
	// Until the limited account has answered once, either target may be chosen.
	eventually(t, 10*time.Second, "the limited account answers", func() bool {
		if r := callPrefix(t, gw.URL, f.key, "/pair"); r.status != http.StatusOK {
			t.Fatalf("before: %d %s", r.status, r.body)
		}
		sent, _ := upstreams(limited)
		return sent > 0
	})
	for i := range 20 {
		if r := callPrefix(t, gw.URL, f.key, "/pair"); r.status != http.StatusOK || r.header.Get(proxy.QueuedHeader) != "" {
			t.Fatalf("request %d: %d %s (queued %q)", i, r.status, r.body, r.header.Get(proxy.QueuedHeader))
		}
	}
	if sent, refused := upstreams(limited); sent != 1 || refused != 0 {
		t.Errorf("the exhausted account saw %d requests, %d refused; want only the first", sent, refused)
	}
}

// TestProviderLimitWaitsForTheAccount: a request that would be the account's
// 429 waits for its capacity instead, within PROVIDER_LIMIT_WAIT, and says
// how long it waited; headers that do not parse hold nothing.
func TestProviderLimitWaitsForTheAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	limited, limitedURL := limitedUpstream(t, 60, nil)
	var hostile atomic.Bool
	_, noisyURL := limitedUpstream(t, 0, func(h http.Header) {
		if hostile.Load() {
			h.Set("X-Ratelimit-Limit-Requests", "10")
			h.Set("X-Ratelimit-Remaining-Requests", "0")
			h.Set("X-Ratelimit-Reset-Requests", "99999999h")
			h.Set("Anthropic-Ratelimit-Requests-Limit", "-1")
			h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
			h.Set("Anthropic-Ratelimit-Tokens-Limit", "1000")
			h.Set("Anthropic-Ratelimit-Tokens-Remaining", "0")
			h.Set("Anthropic-Ratelimit-Tokens-Reset", "tomorrow")
			h.Set("Retry-After", "NaN")
		}
	})
	addLimitedRoute(t, f, "/limited", limitedURL, nil)
	addLimitedRoute(t, f, "/noisy", noisyURL, nil)
	gw := f.replica(t)

	// The account's 60 a minute, then more until one waits: the account refills
	// one a second, so on a slow machine the 61st may still find room.
	waited := false
	for i := range 120 {
		r := callPrefix(t, gw.URL, f.key, "/limited")
		if r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		if q := r.header.Get(proxy.QueuedHeader); q != "" {
			if queued, _ := strconv.Atoi(q); i < 60 || queued <= 0 || queued > 2000 {
				t.Errorf("request %d waited %q ms, want one past the account's 60 to wait up to 2s", i, q)
			}
			waited = true
			break
		}
	}
	if !waited {
		t.Error("120 requests in a row to a 60-a-minute account, and none waited for its capacity")
	}
	if _, refused := upstreams(limited); refused != 0 {
		t.Errorf("the account refused %d requests; the gateway sent them into a known 429", refused)
	}

	hostile.Store(true)
	for i := range 20 {
		if r := callPrefix(t, gw.URL, f.key, "/noisy"); r.status != http.StatusOK || r.header.Get(proxy.QueuedHeader) != "" {
			t.Fatalf("hostile headers, request %d: %d %s (queued %q)", i, r.status, r.body, r.header.Get(proxy.QueuedHeader))
		}
	}
}
