package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/apikey"
	"github.com/tollgate/tollgate/proxy/breaker"
	"github.com/tollgate/tollgate/proxy/faulty"
)

// quietBreaker never trips within a test's few requests, so a test can look
// at ejection or retries alone.
var quietBreaker = breaker.Settings{MinRequests: 1 << 30}

// poolGateway serves one member and one route spread over upstreams.
type poolGateway struct {
	url, key string
	gw       *Gateway
	snap     *Snapshot
}

// newPoolGateway builds a gateway whose route /p lists upstreams as targets;
// edit adjusts the route (dialect, attempts, credentials) before it is used.
func newPoolGateway(t *testing.T, opts Options, edit func(*Route), upstreams ...string) poolGateway {
	t.Helper()
	k := apikey.Generate()
	route := Route{ID: 1, TeamID: 1, Prefix: "/p", Dialect: DialectGeneric, MaxAttempts: 1}
	for _, raw := range upstreams {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		route.Targets = append(route.Targets, NewTarget(u, ""))
	}
	if edit != nil {
		edit(&route)
	}
	snap := NewSnapshot([]Team{{ID: 1}}, []Key{{ID: k.ID, TeamID: 1, MemberID: 1, SecretHash: k.SecretHash}},
		[]Member{{ID: 1, TeamID: 1}}, []Route{route}, nil, time.Now())
	opts.Snapshots = staticSource{snap}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Transport == nil {
		opts.Transport = loopbackTransport()
	}
	g := New(opts)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return poolGateway{url: srv.URL, key: k.Plaintext, gw: g, snap: snap}
}

// call sends one request through the gateway and reads the whole answer.
func (p poolGateway) call(t *testing.T, method, path string) (int, http.Header, string) {
	t.Helper()
	code, h, body, err := p.send(method, path)
	if err != nil {
		t.Fatal(err)
	}
	return code, h, body
}

// send is call for goroutines other than the test's.
func (p poolGateway) send(method, path string) (int, http.Header, string, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"input":"hello"}`)
	}
	req, _ := http.NewRequest(method, p.url+path, body)
	req.Header.Set("x-api-key", p.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// TestBreakerShedsAStormAndRecovers: a target answering 503 trips its breaker
// after MinRequests; the gateway then answers a provider-shaped 503 at once,
// without calling the upstream; after the cooldown, probes find it healthy
// again and traffic resumes by itself.
func TestBreakerShedsAStormAndRecovers(t *testing.T) {
	t.Parallel()
	up := faulty.Flaky(t, "a", 10, http.StatusServiceUnavailable)
	var mu sync.Mutex
	var transitions []string
	obs := &upstreamRecorder{onBreaker: func(from, to breaker.State) {
		mu.Lock()
		transitions = append(transitions, to.String())
		mu.Unlock()
	}}
	var clock atomic.Int64 // the breakers' clock, in ns: moved by hand so a slow machine cannot reach the cooldown
	clock.Store(time.Now().UnixNano())
	p := newPoolGateway(t, Options{UpstreamObservers: []UpstreamObserver{obs}, Now: func() time.Time { return time.Unix(0, clock.Load()) },
		Resilience: ResilienceOptions{
			Breaker:    breaker.Settings{MinRequests: 10, FailureRatio: 0.5, Cooldown: 5 * time.Second, HalfOpenProbes: 1, CloseAfter: 2},
			EjectAfter: 1 << 30,
		}}, nil, up.URL)

	for i := range 10 {
		if code, _, _ := p.call(t, http.MethodPost, "/p/v1/messages"); code != http.StatusServiceUnavailable {
			t.Fatalf("request %d: status %d, want the upstream's 503", i, code)
		}
	}
	for range 50 {
		code, h, body := p.call(t, http.MethodPost, "/p/v1/messages")
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "5" || !strings.Contains(body, "not sending it traffic") {
			t.Fatalf("with the breaker open: status %d Retry-After %q body %s", code, h.Get("Retry-After"), body)
		}
	}
	if n := up.Requests(); n != 10 {
		t.Fatalf("upstream saw %d requests, want 10: an open breaker must not call it", n)
	}

	clock.Add(int64(5 * time.Second)) // the cooldown; the upstream answers 200 from now on
	for i := range 5 {
		if code, _, body := p.call(t, http.MethodPost, "/p/v1/messages"); code != http.StatusOK {
			t.Fatalf("after the cooldown, request %d: status %d %s", i, code, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(transitions, ","); got != "open,half_open,closed" {
		t.Errorf("breaker transitions %s, want open,half_open,closed", got)
	}
}

// TestRetriedGETReachesAnotherTarget: a GET that fails on one target is sent
// once more, to the other target, and the caller sees only the success.
func TestRetriedGETReachesAnotherTarget(t *testing.T) {
	t.Parallel()
	bad := faulty.Status(t, http.StatusBadGateway)
	good := faulty.Flaky(t, "good", 0, 0)
	p := newPoolGateway(t, Options{Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 1 << 30,
		RetryBackoff: time.Millisecond, MinRetries: 100}},
		func(r *Route) { r.MaxAttempts = 2 }, bad.URL, good.URL)
	for i := range 40 {
		code, h, body := p.call(t, http.MethodGet, "/p/v1/models")
		if code != http.StatusOK || h.Get("X-Faulty-Server") != "good" {
			t.Fatalf("GET %d: status %d from %q: %s", i, code, h.Get("X-Faulty-Server"), body)
		}
	}
	if bad.Requests() == 0 {
		t.Fatal("the failing target was never tried; the test proves nothing")
	}
	if got := good.Requests(); got != 40 {
		t.Errorf("the healthy target saw %d GETs, want 40: every retry of a GET that failed on the other must land there", got)
	}
}

// TestRetriedGETSurvivesARefusedTarget: a transport error (nothing listens)
// is retried like a 502; with retries switched off the caller sees the 502.
func TestRetriedGETSurvivesARefusedTarget(t *testing.T) {
	t.Parallel()
	good := faulty.Flaky(t, "good", 0, 0)
	refused := faulty.Refused(t)
	opts := Options{Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 1 << 30, RetryBackoff: time.Millisecond, MinRetries: 100}}
	p := newPoolGateway(t, opts, func(r *Route) { r.MaxAttempts = 2 }, refused, good.URL)
	for i := range 20 {
		if code, _, body := p.call(t, http.MethodGet, "/p/v1/models"); code != http.StatusOK {
			t.Fatalf("GET %d: %d %s", i, code, body)
		}
	}
	once := newPoolGateway(t, opts, func(r *Route) { r.MaxAttempts = 1 }, refused)
	if code, _, body := once.call(t, http.MethodGet, "/p/v1/models"); code != http.StatusBadGateway || !strings.Contains(body, "could not be reached") {
		t.Fatalf("one attempt at a refused target: %d %s", code, body)
	}
}

// TestPOSTIsNeverSentTwice: a paid POST that fails is answered with the
// failure; it is never retried, on the same target or another.
func TestPOSTIsNeverSentTwice(t *testing.T) {
	t.Parallel()
	bad := faulty.Status(t, http.StatusServiceUnavailable)
	reset := faulty.ResetMidStream(t, 0)
	good := faulty.Flaky(t, "good", 0, 0)
	p := newPoolGateway(t, Options{Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 1 << 30, MinRetries: 100}},
		func(r *Route) { r.MaxAttempts = 5 }, bad.URL, reset.URL, good.URL)
	const n = 60
	failed := 0
	for range n {
		// A reset before any byte reached the caller reaches them as a broken connection.
		if code, _, _, err := p.send(http.MethodPost, "/p/v1/messages"); err != nil || code != http.StatusOK {
			failed++
		}
	}
	total := bad.RequestsFor(http.MethodPost) + reset.RequestsFor(http.MethodPost) + good.RequestsFor(http.MethodPost)
	if total != n {
		t.Fatalf("upstreams saw %d POSTs for %d requests: a POST was sent twice", total, n)
	}
	if failed == 0 || int64(failed) != bad.Requests()+reset.Requests() {
		t.Errorf("%d POSTs failed for the caller, want exactly the %d that reached the failing targets",
			failed, bad.Requests()+reset.Requests())
	}
}

// TestRetryBudgetBoundsRetries: with every target failing, retries stay
// within 20% of the requests (plus the small floor), so a dead pool is not
// sent five times the load.
func TestRetryBudgetBoundsRetries(t *testing.T) {
	t.Parallel()
	a, b := faulty.Status(t, http.StatusServiceUnavailable), faulty.Status(t, http.StatusServiceUnavailable)
	obs := &upstreamRecorder{}
	p := newPoolGateway(t, Options{UpstreamObservers: []UpstreamObserver{obs},
		Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 1 << 30, RetryBackoff: time.Millisecond}},
		func(r *Route) { r.MaxAttempts = 5 }, a.URL, b.URL)
	const n = 100
	for range n {
		if code, _, _ := p.call(t, http.MethodGet, "/p/v1/models"); code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want the upstream's 503", code)
		}
	}
	sent := a.Requests() + b.Requests()
	if limit := int64(n + n/5 + 3); sent > limit || sent < n+3 {
		t.Errorf("upstreams saw %d requests for %d GETs, want between %d and %d", sent, n, n+3, limit)
	}
	if obs.budgetExhausted.Load() == 0 || obs.retries.Load() != sent-n {
		t.Errorf("observed %d retries and %d exhausted budgets for %d extra requests", obs.retries.Load(), obs.budgetExhausted.Load(), sent-n)
	}
}

// TestPassiveEjection: a target failing EjectAfter times in a row leaves the
// rotation; its healthy sibling carries the traffic.
func TestPassiveEjection(t *testing.T) {
	t.Parallel()
	bad := faulty.Status(t, http.StatusInternalServerError)
	good := faulty.Flaky(t, "good", 0, 0)
	obs := &upstreamRecorder{}
	p := newPoolGateway(t, Options{UpstreamObservers: []UpstreamObserver{obs},
		Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 3, EjectFor: time.Minute}}, nil, bad.URL, good.URL)
	for range 60 {
		p.call(t, http.MethodPost, "/p/v1/messages")
	}
	if got := bad.Requests(); got != 3 {
		t.Errorf("the failing target saw %d requests, want exactly 3 before its ejection", got)
	}
	if obs.ejections.Load() != 1 {
		t.Errorf("%d ejections observed, want 1", obs.ejections.Load())
	}
}

// TestPanicThresholdSpreadsOverAll: when every target is ejected the gateway
// spreads traffic over all of them rather than refusing everything.
func TestPanicThresholdSpreadsOverAll(t *testing.T) {
	t.Parallel()
	a, b := faulty.Status(t, http.StatusInternalServerError), faulty.Status(t, http.StatusInternalServerError)
	p := newPoolGateway(t, Options{Resilience: ResilienceOptions{Breaker: quietBreaker, EjectAfter: 2, EjectFor: time.Minute}},
		nil, a.URL, b.URL)
	for i := range 40 {
		if code, _, _ := p.call(t, http.MethodPost, "/p/v1/messages"); code != http.StatusInternalServerError {
			t.Fatalf("request %d: status %d, want the upstream's own 500 (panic mode), not a gateway refusal", i, code)
		}
	}
	if a.Requests() < 10 || b.Requests() < 10 {
		t.Errorf("targets saw %d and %d requests: in panic mode both should carry traffic", a.Requests(), b.Requests())
	}
}

// TestPowerOfTwoChoicesAvoidsTheBusyTarget: with one target holding many
// requests in flight, new ones go to the idle one.
func TestPowerOfTwoChoicesAvoidsTheBusyTarget(t *testing.T) {
	t.Parallel()
	slow := faulty.HangBeforeHeaders(t)
	fast := faulty.Flaky(t, "fast", 0, 0)
	p := newPoolGateway(t, Options{Resilience: ResilienceOptions{Breaker: quietBreaker}}, nil, slow.URL, fast.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Send requests one at a time until one is parked on the slow target; the
	// others land on the idle fast one and finish.
	for slow.Requests() == 0 {
		sent := slow.Requests() + fast.Requests()
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/p/v1/messages", strings.NewReader("{}"))
			req.Header.Set("x-api-key", p.key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		waitFor(t, func() bool { return slow.Requests()+fast.Requests() == sent+1 })
	}
	fastHealth := p.gw.balancer.ups.healthOf(&p.snap.routes[1][0].Targets[1])
	waitFor(t, func() bool { return fastHealth.inFlight.Load() == 0 })
	before := slow.Requests()
	for i := range 30 {
		if code, _, _ := p.call(t, http.MethodPost, "/p/v1/messages"); code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	if got := slow.Requests(); got != before {
		t.Errorf("the target holding requests received %d more, want 0", got-before)
	}
}

// TestActiveProbeEjectsBeforeTraffic: a target whose health path fails is out
// of rotation from the first probe, before any caller is sent there.
func TestActiveProbeEjectsBeforeTraffic(t *testing.T) {
	t.Parallel()
	down := faulty.Status(t, http.StatusServiceUnavailable)
	up := faulty.Flaky(t, "up", 0, 0)
	p := newPoolGateway(t, Options{Resilience: ResilienceOptions{Breaker: quietBreaker}},
		func(r *Route) { r.HealthPath = "/health" }, down.URL, up.URL)
	p.gw.balancer.probe(context.Background(), p.snap, p.gw.opts.Logger)
	if down.Requests() != 1 || up.Requests() != 1 {
		t.Fatalf("probes reached %d and %d targets, want 1 each", down.Requests(), up.Requests())
	}
	for range 20 {
		p.call(t, http.MethodPost, "/p/v1/messages")
	}
	if got := down.Requests(); got != 1 {
		t.Errorf("the target failing its probe got %d requests after the probe, want 0", got-1)
	}
	// Once no route probes it (its health path was removed), it is back in rotation.
	p.gw.balancer.probe(context.Background(), NewSnapshot(nil, nil, nil, nil, nil, time.Now()), p.gw.opts.Logger)
	for range 20 {
		p.call(t, http.MethodPost, "/p/v1/messages")
	}
	if down.Requests() == 1 {
		t.Error("a target no route probes any more stayed out of rotation")
	}
}

// TestTargetsCarryTheirOwnCredential: two provider accounts on one route; each
// target gets its own key, and a target whose key is not set is skipped.
func TestTargetsCarryTheirOwnCredential(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 100)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("x-api-key")
	}))
	t.Cleanup(echo.Close)
	env := map[string]string{"TOLLGATE_CREDENTIAL_ONE": "key-one", "TOLLGATE_CREDENTIAL_TWO": "key-two"}
	p := newPoolGateway(t, Options{Getenv: func(k string) string { return env[k] }}, func(r *Route) {
		r.CredentialHeader, r.CredentialFormat = "x-api-key", "{}"
		u, _ := url.Parse(echo.URL)
		base := *u
		base.Path = "/other-account"
		r.Targets = []Target{NewTarget(u, "TOLLGATE_CREDENTIAL_ONE"), NewTarget(&base, "TOLLGATE_CREDENTIAL_TWO"),
			NewTarget(u, "TOLLGATE_CREDENTIAL_UNSET")}
	})
	keys := map[string]int{}
	for range 40 {
		p.call(t, http.MethodPost, "/p/v1/messages")
		keys[<-seen]++
	}
	if len(keys) != 2 || keys["key-one"] == 0 || keys["key-two"] == 0 {
		t.Errorf("upstream saw credentials %v, want both accounts' keys and nothing else", keys)
	}
}

// TestUpstreamFaults: each misbehaving upstream gets a provider-shaped answer
// (or a cut stream) within its bound, never a hang.
func TestUpstreamFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		upstream func(t *testing.T) (string, *faulty.Server)
		opts     Options
		method   string
		status   int    // 0: the stream starts, then is cut
		body     string // in the answer
		within   time.Duration
		failed   string // Outcome.UpstreamError
	}{
		{name: "Refused", upstream: func(t *testing.T) (string, *faulty.Server) { return faulty.Refused(t), nil },
			method: http.MethodPost, status: http.StatusBadGateway, body: "could not be reached", within: 2 * time.Second, failed: "unreachable"},
		{name: "HangBeforeHeaders", upstream: func(t *testing.T) (string, *faulty.Server) { s := faulty.HangBeforeHeaders(t); return s.URL, s },
			opts:   Options{Transport: NewTransport(TransportOptions{FirstByteTimeout: 300 * time.Millisecond, Guard: loopbackGuard()})},
			method: http.MethodPost, status: http.StatusGatewayTimeout, body: "did not answer in time", within: 2 * time.Second, failed: "timeout"},
		{name: "ResetMidStream", upstream: func(t *testing.T) (string, *faulty.Server) { s := faulty.ResetMidStream(t, 3); return s.URL, s },
			method: http.MethodPost, body: "message_start", within: 2 * time.Second},
		{name: "HugeAnnounced", upstream: func(t *testing.T) (string, *faulty.Server) { s := faulty.Huge(t, 512<<20, true); return s.URL, s },
			opts:   Options{MaxResponseBytes: 1 << 20},
			method: http.MethodGet, status: http.StatusBadGateway, body: "MAX_RESPONSE_BYTES", within: 2 * time.Second, failed: "response_too_large"},
		{name: "HugeUnannounced", upstream: func(t *testing.T) (string, *faulty.Server) { s := faulty.Huge(t, 512<<20, false); return s.URL, s },
			opts:   Options{MaxResponseBytes: 1 << 20},
			method: http.MethodGet, body: `{"pad":"`, within: 5 * time.Second, failed: "response_too_large"},
		{name: "DribbleHitsRequestCeiling", upstream: func(t *testing.T) (string, *faulty.Server) {
			s := faulty.Dribble(t, 50*time.Millisecond)
			return s.URL, s
		}, opts: Options{RequestTimeout: 600 * time.Millisecond, StreamIdleTimeout: time.Minute},
			method: http.MethodPost, body: ": dribble", within: 2 * time.Second, failed: "request_timeout"},
		{name: "UnaskedUpgrade", upstream: func(t *testing.T) (string, *faulty.Server) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
				buf.Flush()
				time.Sleep(100 * time.Millisecond)
			}))
			t.Cleanup(srv.Close)
			return srv.URL, nil
		}, method: http.MethodGet, status: http.StatusBadGateway, body: "could not be reached", within: 2 * time.Second, failed: "unreachable"},
		{name: "DribbleHitsStreamBytes", upstream: func(t *testing.T) (string, *faulty.Server) {
			s := faulty.Dribble(t, time.Millisecond)
			return s.URL, s
		}, opts: Options{MaxStreamBytes: 1024},
			method: http.MethodPost, body: ": dribble", within: 5 * time.Second, failed: "response_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, srv := tt.upstream(t)
			outcomes := make(chan Outcome, 1)
			tt.opts.Observers = []Observer{outcomeRecorder(outcomes)}
			p := newPoolGateway(t, tt.opts, nil, raw)
			start := time.Now()
			req, _ := http.NewRequest(tt.method, p.url+"/p/v1/messages", strings.NewReader(`{}`))
			req.Header.Set("x-api-key", p.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, readErr := io.ReadAll(resp.Body)
			took := time.Since(start)
			if tt.status != 0 {
				if resp.StatusCode != tt.status || readErr != nil || !strings.Contains(string(body), tt.body) ||
					!strings.Contains(string(body), `"type":"error"`) && !strings.Contains(string(body), `"error":{`) {
					t.Fatalf("status %d (want %d), read error %v, body %.300s", resp.StatusCode, tt.status, readErr, body)
				}
			} else if readErr == nil || !strings.Contains(string(body), tt.body) {
				t.Fatalf("stream ended cleanly (read error %v) or without its start (%.100s): want it cut", readErr, body)
			}
			if took > tt.within {
				t.Errorf("answered after %s, want within %s", took, tt.within)
			}
			if srv != nil && srv.BytesWritten() > 64<<20 {
				t.Errorf("the upstream sent %d bytes: the gateway kept reading past its bound", srv.BytesWritten())
			}
			select {
			case o := <-outcomes:
				if o.UpstreamError != tt.failed {
					t.Errorf("Outcome.UpstreamError = %q, want %q", o.UpstreamError, tt.failed)
				}
			case <-time.After(5 * time.Second):
				t.Error("no outcome reported")
			}
			// Whatever happened, the target no longer counts the request as in flight.
			h := p.gw.balancer.ups.healthOf(&p.snap.routes[1][0].Targets[0])
			waitFor(t, func() bool { return h.inFlight.Load() == 0 })
		})
	}
}

// TestInFlightCapSheds: past MaxInFlight the gateway answers 503 with
// Retry-After at once, and serves again once requests finish.
func TestInFlightCapSheds(t *testing.T) {
	t.Parallel()
	hang := faulty.HangBeforeHeaders(t)
	p := newPoolGateway(t, Options{MaxInFlight: 2}, nil, hang.URL)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/p/v1/messages", strings.NewReader("{}"))
			req.Header.Set("x-api-key", p.key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitFor(t, func() bool { return hang.Requests() == 2 })
	start := time.Now()
	code, h, body := p.call(t, http.MethodPost, "/p/v1/messages")
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "MAX_IN_FLIGHT") {
		t.Fatalf("third request: status %d Retry-After %q body %s", code, h.Get("Retry-After"), body)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("shedding took %s, want at once", took)
	}
	cancel()
	wg.Wait()
	waitFor(t, func() bool { return p.gw.inFlight.n.Load() == 0 })
	// A path no route serves answers past the cap check, at once.
	if code, _, body := p.call(t, http.MethodGet, "/nowhere"); code != http.StatusNotFound {
		t.Errorf("after the requests in flight finished: status %d %s, want the 404 behind the cap", code, body)
	}
}

// TestMemberQueue: a member at MemberMaxInFlight waits in a short queue; past
// the queue, or past the queue wait, it gets 429 saying which bound.
func TestMemberQueue(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var arrived atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
	}))
	t.Cleanup(up.Close)
	p := newPoolGateway(t, Options{MemberMaxInFlight: 1, MemberQueueDepth: 1, MemberQueueWait: 400 * time.Millisecond}, nil, up.URL)
	// Before the servers close, which would wait for the held request.
	t.Cleanup(func() { close(release) })

	go p.send(http.MethodPost, "/p/v1/messages") // takes the one slot
	waitFor(t, func() bool { return arrived.Load() == 1 })
	queued := make(chan string, 1)
	start := time.Now()
	go func() {
		code, _, body, _ := p.send(http.MethodPost, "/p/v1/messages")
		queued <- fmt.Sprint(code, " ", body)
	}()
	waitFor(t, func() bool {
		p.gw.members.mu.Lock()
		defer p.gw.members.mu.Unlock()
		return p.gw.members.gates[1] != nil && p.gw.members.gates[1].waiting.Load() == 1
	})
	code, _, body := p.call(t, http.MethodPost, "/p/v1/messages")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "MEMBER_QUEUE_DEPTH") {
		t.Fatalf("past the queue: status %d %s", code, body)
	}
	got := <-queued
	if !strings.HasPrefix(got, "429 ") || !strings.Contains(got, "MEMBER_QUEUE_WAIT") {
		t.Fatalf("queued request: %s", got)
	}
	if took := time.Since(start); took < 350*time.Millisecond || took > 2*time.Second {
		t.Errorf("queued request refused after %s, want about the 400ms queue wait", took)
	}
	if n := arrived.Load(); n != 1 {
		t.Errorf("upstream saw %d requests, want only the one in flight", n)
	}
}

// TestSlowBodyIsCut: a client that sends its headers and then dribbles its
// body gets 408 after the body read timeout instead of holding a slot.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	up := faulty.Flaky(t, "up", 0, 0)
	p := newPoolGateway(t, Options{BodyReadTimeout: 300 * time.Millisecond}, nil, up.URL)
	head := "POST /p/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + p.key + "\r\nContent-Length: 1000\r\n\r\n"
	// One byte every 5ms: the headers arrive in about 1s, the body would take 5s more.
	took, answer := faulty.SlowClient(t, p.url, append([]byte(head), strings.Repeat("x", 1000)...), 5*time.Millisecond, 8*time.Second)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(answer))), nil)
	if err != nil {
		t.Fatalf("no HTTP answer after %s: %v (%q)", took, err, answer)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "BODY_READ_TIMEOUT") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if headers := time.Duration(len(head)) * 5 * time.Millisecond; took > headers+2*time.Second {
		t.Errorf("answered after %s, want about the 300ms body timeout after the %s of headers", took, headers)
	}
	if up.Requests() != 0 {
		t.Error("a request whose body never arrived reached the upstream")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// upstreamRecorder counts what the resilience machinery reports.
type upstreamRecorder struct {
	onBreaker       func(from, to breaker.State)
	ejections       atomic.Int64
	retries         atomic.Int64
	budgetExhausted atomic.Int64
}

func (u *upstreamRecorder) BreakerChanged(_, _ string, from, to breaker.State) {
	if u.onBreaker != nil {
		u.onBreaker(from, to)
	}
}
func (u *upstreamRecorder) Ejected(string, string, time.Duration) { u.ejections.Add(1) }
func (u *upstreamRecorder) Retried(string, string)                { u.retries.Add(1) }
func (u *upstreamRecorder) RetryBudgetExhausted(string)           { u.budgetExhausted.Add(1) }

// outcomeRecorder hands each finished request's Outcome to a channel.
type outcomeRecorder chan Outcome

func (outcomeRecorder) Started(int64, int64) {}
func (o outcomeRecorder) Finished(x Outcome) { o <- x }
