package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/apikey"
	"github.com/tollgate/tollgate/proxy/netguard"
)

type staticSource struct{ snap *Snapshot }

func (s staticSource) Current() *Snapshot { return s.snap }

// newTestGateway serves one team with one key and one route to upstream.
func newTestGateway(t *testing.T, upstream string, opts Options) (gatewayURL, key string) {
	t.Helper()
	g := apikey.Generate()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	snap := NewSnapshot(
		[]Team{{ID: 1}},
		[]Key{{ID: g.ID, TeamID: 1, MemberID: 1, SecretHash: g.SecretHash}},
		[]Member{{ID: 1, TeamID: 1}},
		[]Route{{ID: 1, TeamID: 1, Prefix: "/p", Targets: []Target{NewTarget(u, "ANTHROPIC_API_KEY")}, Dialect: DialectAnthropic,
			CredentialHeader: "x-api-key", CredentialFormat: "{}"}},
		nil, time.Now())
	opts.Snapshots = staticSource{snap}
	opts.Getenv = func(string) string { return "provider-secret" }
	if opts.Transport == nil {
		opts.Transport = loopbackTransport()
	}
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return srv.URL, g.Plaintext
}

func get(t *testing.T, url, key string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// loopbackGuard allows loopback, where the tests' httptest upstreams listen.
func loopbackGuard() *netguard.Guard {
	return netguard.New(netguard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
}

// loopbackTransport is the upstream transport with loopbackGuard.
func loopbackTransport() *http.Transport {
	return NewTransport(TransportOptions{Guard: loopbackGuard()})
}

func TestValidateUpstreamRefusesQueries(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://api.anthropic.com/base": true,
		"https://example.com/?x=1":       false,
		"https://example.com/#top":       false,
		"http://169.254.169.254":         false,
	} {
		_, err := ValidateUpstream(context.Background(), loopbackGuard(), raw)
		if (err == nil) != ok {
			t.Errorf("ValidateUpstream(%q) error = %v, want ok=%v", raw, err, ok)
		}
	}
}

// TestDialTimeRefusal: a route that reaches a forbidden address anyway (edited in
// the database, or a name that resolves differently later) is refused when
// dialing, with a provider-shaped 502.
func TestDialTimeRefusal(t *testing.T) {
	t.Parallel()
	gw, key := newTestGateway(t, "http://169.254.169.254", Options{})
	resp, body := get(t, gw+"/p/latest/meta-data/", key)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "refuses to call") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// TestLongStreamSurvivesIdleTimeoutCutsStall: a stream that keeps sending lives
// past any idle timeout; one that stalls is ended and its upstream cancelled.
func TestLongStreamSurvivesIdleTimeoutCutsStall(t *testing.T) {
	t.Parallel()
	var cancelled atomic.Bool
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		gap := 50 * time.Millisecond
		if r.URL.Path == "/stall" {
			gap = 2 * time.Second
		}
		for i := range 12 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				cancelled.Store(true)
				return
			}
		}
	}))
	t.Cleanup(upstream.Close)
	gw, key := newTestGateway(t, upstream.URL, Options{StreamIdleTimeout: 300 * time.Millisecond})

	resp, body := get(t, gw+"/p/steady", key) // 12 × 50ms = 600ms, twice the idle timeout
	if resp.StatusCode != http.StatusOK || strings.Count(body, "data: ") != 12 {
		t.Fatalf("steady stream: status %d, %d events", resp.StatusCode, strings.Count(body, "data: "))
	}
	start := time.Now()
	_, body = get(t, gw+"/p/stall", key)
	if n := strings.Count(body, "data: "); n != 1 {
		t.Fatalf("stalled stream delivered %d events, want 1 before the cut", n)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("stalled stream ended after %s, want about the idle timeout", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !cancelled.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !cancelled.Load() {
		t.Fatal("upstream request was not cancelled")
	}
}

// TestClientDisconnectCancelsUpstream: when the caller hangs up mid-stream the
// upstream request is cancelled rather than left to run (and bill).
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			fmt.Fprint(w, "data: x\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				close(cancelled)
				return
			}
		}
	}))
	t.Cleanup(upstream.Close)
	gw, key := newTestGateway(t, upstream.URL, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw+"/p/stream", nil)
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream still streaming 5s after the client left")
	}
}

// TestBodyBound: a body over the limit is refused before anything goes upstream,
// whether it announces its length or not.
func TestBodyBound(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(upstream.Close)
	gw, key := newTestGateway(t, upstream.URL, Options{MaxBodyBytes: 1024})
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(strings.Repeat("a", 4096))
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, gw+"/p/v1/messages", body)
		req.Header.Set("x-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "request_too_large") {
			t.Errorf("chunked=%v: status %d body %s", chunked, resp.StatusCode, b)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d oversized requests reached the upstream", hits.Load())
	}
}

func TestPresentedKey(t *testing.T) {
	t.Parallel()
	key := "tg_aaaaaaaaaaaaa_" + strings.Repeat("b", apikey.SecretLen)
	for name, tc := range map[string]struct {
		headers [][2]string
		query   string
		ok      bool
	}{
		"x-api-key":            {[][2]string{{"X-Api-Key", key}}, "", true},
		"bearer":               {[][2]string{{"Authorization", "Bearer " + key}}, "", true},
		"bearer lower-case":    {[][2]string{{"Authorization", "bearer " + key}}, "", true},
		"azure api-key":        {[][2]string{{"Api-Key", key}}, "", true},
		"same key twice":       {[][2]string{{"X-Api-Key", key}, {"Authorization", "Bearer " + key}}, "", true},
		"none":                 {nil, "", false},
		"empty bearer":         {[][2]string{{"Authorization", "Bearer "}}, "", false},
		"basic":                {[][2]string{{"Authorization", "Basic " + key}}, "", false},
		"repeated header":      {[][2]string{{"X-Api-Key", key}, {"X-Api-Key", key}}, "", false},
		"different keys":       {[][2]string{{"X-Api-Key", key}, {"Authorization", "Bearer tg_other"}}, "", false},
		"key in query":         {nil, "key=" + key, false},
		"header and query key": {[][2]string{{"X-Api-Key", key}}, "k=" + key, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/p/x?"+tc.query, nil)
		for _, h := range tc.headers {
			r.Header.Add(h[0], h[1])
		}
		got, ok := presentedKey(r)
		if ok != tc.ok || (ok && got != key) {
			t.Errorf("%s: got %q, %v; want ok=%v", name, got, ok, tc.ok)
		}
	}
}
