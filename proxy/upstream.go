package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/proxy/breaker"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// Target is one upstream a route spreads its traffic over: a provider account,
// a region, a fallback.
type Target struct {
	Upstream      *url.URL
	CredentialEnv string // gateway environment variable holding its credential
	id            string // whose health this is: the same URL and account share it across routes
}

// NewTarget names a target by its upstream and credential variable.
func NewTarget(upstream *url.URL, credentialEnv string) Target {
	return Target{Upstream: upstream, CredentialEnv: credentialEnv, id: upstream.String() + " " + credentialEnv}
}

// MaxTargets is how many targets a route may list; the balancer tracks tried
// targets in a bit set.
const MaxTargets = 16

// ResilienceOptions tune how the gateway treats failing upstreams. Zero values
// take the defaults noted.
type ResilienceOptions struct {
	// Breaker is the template for each target's circuit breaker; OnStateChange
	// and Now are set by the gateway.
	Breaker breaker.Settings
	// EjectAfter consecutive failures take a target out of rotation (default 5)
	// for EjectFor times the number of ejections in a row, at most 10 times
	// (default 30s).
	EjectAfter int
	EjectFor   time.Duration
	// PanicThreshold: when fewer than this share of a route's targets look
	// healthy, traffic spreads over all of them rather than piling onto the few
	// (default 0.5).
	PanicThreshold float64
	// RetryBudget bounds retries to this share of a route's requests over the
	// last 10s (default 0.2), plus MinRetries so a quiet route can still retry
	// (default 3).
	RetryBudget float64
	MinRetries  int
	// RetryBackoff is the base of the exponential backoff with full jitter
	// between attempts (default 50ms), capped at RetryBackoffCap (default 1s).
	RetryBackoff    time.Duration
	RetryBackoffCap time.Duration
	// ProbeInterval is how often targets of routes with a health path are
	// probed (default 10s), each probe bounded by ProbeTimeout (default 5s).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
}

func (o *ResilienceOptions) setDefaults() {
	setDefault(&o.EjectAfter, 5)
	setDefault(&o.EjectFor, 30*time.Second)
	setDefault(&o.PanicThreshold, 0.5)
	setDefault(&o.RetryBudget, 0.2)
	setDefault(&o.MinRetries, 3)
	setDefault(&o.RetryBackoff, 50*time.Millisecond)
	setDefault(&o.RetryBackoffCap, time.Second)
	setDefault(&o.ProbeInterval, 10*time.Second)
	setDefault(&o.ProbeTimeout, 5*time.Second)
}

func setDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// UpstreamObserver learns what the resilience machinery does, for metrics and
// logs. Calls must not block.
type UpstreamObserver interface {
	BreakerChanged(upstream, credentialEnv string, from, to breaker.State)
	Ejected(upstream, credentialEnv string, for_ time.Duration)
	Retried(routePrefix, upstream string)
	RetryBudgetExhausted(routePrefix string)
}

// health is what the gateway knows about one target, shared by every route and
// every snapshot that lists it.
type health struct {
	inFlight atomic.Int64
	breaker  *breaker.Breaker
	// probeDown is set while the target's last active health probe failed.
	probeDown atomic.Bool

	mu           sync.Mutex
	failures     int // consecutive
	ejections    int // consecutive ejections, for the growing ejection time
	ejectedUntil time.Time
}

// upstreams holds every target's health and every route's retry budget.
type upstreams struct {
	opts    ResilienceOptions
	now     func() time.Time
	observe []UpstreamObserver
	health  sync.Map // Target.id -> *health
	budgets sync.Map // route id -> *retryBudget
}

func newUpstreams(opts ResilienceOptions, now func() time.Time, observe []UpstreamObserver) *upstreams {
	opts.setDefaults()
	return &upstreams{opts: opts, now: now, observe: observe}
}

func (u *upstreams) healthOf(t *Target) *health {
	if h, ok := u.health.Load(t.id); ok {
		return h.(*health)
	}
	settings := u.opts.Breaker
	settings.Now = u.now
	host, env := t.Upstream.Host, t.CredentialEnv
	settings.OnStateChange = func(from, to breaker.State) {
		for _, o := range u.observe {
			o.BreakerChanged(host, env, from, to)
		}
	}
	h, _ := u.health.LoadOrStore(t.id, &health{breaker: breaker.New(settings)})
	return h.(*health)
}

func (u *upstreams) budget(routeID int64) *retryBudget {
	if b, ok := u.budgets.Load(routeID); ok {
		return b.(*retryBudget)
	}
	b, _ := u.budgets.LoadOrStore(routeID, &retryBudget{})
	return b.(*retryBudget)
}

// errNoTarget is returned when every target of a route refuses traffic: their
// breakers are open. The caller gets a fast 503 instead of a pile-up.
type errNoTarget struct{ retryIn time.Duration }

func (e *errNoTarget) Error() string {
	return "every upstream target of the route is failing; circuit open for " + e.retryIn.String()
}

// ejected says whether passive ejection or a failed probe took h out of rotation.
func (h *health) ejected(now time.Time) bool {
	if h.probeDown.Load() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return now.Before(h.ejectedUntil)
}

// pick chooses a target for the next attempt by power of two choices on
// requests in flight, among targets not yet tried whose breaker lets a request
// through. Ejected targets are skipped unless too few of the route's targets
// are healthy (panic mode). Once every target was tried, one may be reused.
func (u *upstreams) pick(route *Route, tried uint32, usable func(*Target) bool) (int, *health, breaker.Permit, error) {
	now := u.now()
	var healthy, ready [MaxTargets]int
	var nHealthy, nReady, nUsable, nHealthyInRoute, nUntried int
	var retryIn time.Duration
	for i := range route.Targets {
		if usable(&route.Targets[i]) && tried&(1<<i) == 0 {
			nUntried++
		}
	}
	for i := range route.Targets {
		if !usable(&route.Targets[i]) {
			continue
		}
		nUsable++
		h := u.healthOf(&route.Targets[i])
		isReady := h.breaker.Ready()
		isHealthy := isReady && !h.ejected(now)
		if isHealthy {
			nHealthyInRoute++
		}
		if !isReady {
			if in := h.breaker.RetryIn(); retryIn == 0 || in < retryIn {
				retryIn = in
			}
		}
		if !isReady || nUntried > 0 && tried&(1<<i) != 0 {
			continue
		}
		ready[nReady] = i
		nReady++
		if isHealthy {
			healthy[nHealthy] = i
			nHealthy++
		}
	}
	candidates := healthy[:nHealthy]
	if nHealthyInRoute == 0 || float64(nHealthyInRoute) < u.opts.PanicThreshold*float64(nUsable) {
		candidates = ready[:nReady]
	}
	for len(candidates) > 0 {
		j := u.choose(route, candidates)
		i := candidates[j]
		h := u.healthOf(&route.Targets[i])
		if p, err := h.breaker.Allow(); err == nil {
			return i, h, p, nil
		}
		// Its half-open probe slots filled since Ready; try the others.
		candidates = append(candidates[:j:j], candidates[j+1:]...)
	}
	return 0, nil, breaker.Permit{}, &errNoTarget{retryIn: max(retryIn, time.Second)}
}

// choose returns the index in candidates of the less loaded of two random picks.
func (u *upstreams) choose(route *Route, candidates []int) int {
	if len(candidates) == 1 {
		return 0
	}
	a := rand.IntN(len(candidates))
	b := rand.IntN(len(candidates) - 1)
	if b >= a {
		b++
	}
	if u.healthOf(&route.Targets[candidates[b]]).inFlight.Load() < u.healthOf(&route.Targets[candidates[a]]).inFlight.Load() {
		return b
	}
	return a
}

// attempt is how one upstream call went, for the breaker and ejection.
type attempt int

const (
	attemptOK      attempt = iota
	attemptFailed          // the target's fault: no answer, or a 5xx
	attemptNeutral         // says nothing about the target: the caller went away
)

func (u *upstreams) record(t *Target, h *health, p breaker.Permit, a attempt) {
	switch a {
	case attemptNeutral:
		h.breaker.Release(p)
		return
	case attemptOK:
		h.breaker.Done(p, true)
		h.mu.Lock()
		h.failures = 0
		if !u.now().Before(h.ejectedUntil) {
			h.ejections = 0
		}
		h.mu.Unlock()
		return
	}
	h.breaker.Done(p, false)
	now := u.now()
	h.mu.Lock()
	h.failures++
	var ejectFor time.Duration
	if h.failures >= u.opts.EjectAfter && !now.Before(h.ejectedUntil) {
		h.ejections = min(h.ejections+1, 10)
		ejectFor = u.opts.EjectFor * time.Duration(h.ejections)
		h.ejectedUntil = now.Add(ejectFor)
		h.failures = 0
	}
	h.mu.Unlock()
	if ejectFor > 0 {
		for _, o := range u.observe {
			o.Ejected(t.Upstream.Host, t.CredentialEnv, ejectFor)
		}
	}
}

// retryBudget counts a route's requests and retries over the last 10 seconds
// in one-second buckets, so retries stay a bounded share of traffic: a dead
// pool cannot multiply load.
type retryBudget struct {
	mu      sync.Mutex
	buckets [10]struct {
		second            int64
		requests, retries int
	}
}

func (b *retryBudget) bucket(now time.Time) *struct {
	second            int64
	requests, retries int
} {
	sec := now.Unix()
	bk := &b.buckets[sec%int64(len(b.buckets))]
	if bk.second != sec {
		bk.second, bk.requests, bk.retries = sec, 0, 0
	}
	return bk
}

func (b *retryBudget) request(now time.Time) {
	b.mu.Lock()
	b.bucket(now).requests++
	b.mu.Unlock()
}

// allowRetry takes one retry from the budget if the retries of the last 10s
// stay within ratio of the requests, or within minRetries.
func (b *retryBudget) allowRetry(now time.Time, ratio float64, minRetries int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	current := b.bucket(now)
	var requests, retries int
	oldest := now.Unix() - int64(len(b.buckets)) + 1
	for _, bk := range b.buckets {
		if bk.second >= oldest {
			requests += bk.requests
			retries += bk.retries
		}
	}
	if retries+1 > max(minRetries, int(ratio*float64(requests))) {
		return false
	}
	current.retries++
	return true
}

// balancer is the gateway's upstream RoundTripper: it aims each attempt at one
// of the route's targets, records how the target did, and retries idempotent
// requests on another target. Paid POSTs are never retried: a token is spent
// at most once.
type balancer struct {
	next   http.RoundTripper
	ups    *upstreams
	limits *providerlimits.Tracker // nil: the providers' own limits are not tracked
	getenv func(string) string
	log    *slog.Logger
}

// idempotent methods may be sent twice without doing twice what they ask.
func idempotent(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

func (b *balancer) RoundTrip(out *http.Request) (*http.Response, error) {
	t := out.Context().Value(targetKey{}).(*target)
	route := &t.route
	ctx := out.Context()
	retryable := idempotent(out.Method) && route.MaxAttempts > 1
	var budget *retryBudget
	if retryable {
		budget = b.ups.budget(route.ID)
		budget.request(b.ups.now())
	}
	usable := func(tg *Target) bool { return route.CredentialHeader == "" || b.getenv(tg.CredentialEnv) != "" }
	i, h, permit, err := b.pickFirst(ctx, route, usable, t)
	if err != nil {
		return nil, err
	}
	// Without ReverseProxy's 1xx forwarding: an informational answer's headers
	// would reach the caller before modifyResponse could scrub them (cookies, an
	// echoed credential), and an attempt that is retried must not have sent the
	// caller anything.
	req := out.WithContext(t.ctx)
	var tried uint32
	for n := 1; ; n++ {
		tried |= 1 << i
		tg := &route.Targets[i]
		if n > 1 {
			req = out.Clone(t.ctx)
		}
		if out.GetBody != nil {
			// The first attempt takes a fresh body too: ReverseProxy wraps the
			// request's in a type the transport does not know is in memory, so it
			// would flush the headers in a write of their own before the body.
			if req.Body, err = out.GetBody(); err != nil {
				b.ups.record(tg, h, permit, attemptNeutral)
				if n == 1 {
					t.reservation.Cancel()
				}
				return nil, err
			}
		}
		b.aim(req, t, tg)
		h.inFlight.Add(1)
		var res providerlimits.Reservation
		if n == 1 {
			res = t.reservation
		}
		sentAt := b.limitsNow()
		resp, err := b.next.RoundTrip(req)
		b.observeLimits(tg, res, sentAt, resp)
		if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
			// The gateway never asks for an upgrade (checkRequestShape refuses it).
			resp.Body.Close()
			resp, err = nil, errUnaskedUpgrade
		}
		b.ups.record(tg, h, permit, classify(ctx, resp, err))
		again := retryable && n < route.MaxAttempts && ctx.Err() == nil &&
			(err != nil || resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout)
		// The next target is chosen before this answer is dropped: with none
		// available the caller gets this answer, not a refusal.
		var nextI int
		var nextH *health
		var nextPermit breaker.Permit
		if again {
			var noTarget error
			nextI, nextH, nextPermit, noTarget = b.ups.pick(route, tried, usable)
			again = noTarget == nil
		}
		if again && !budget.allowRetry(b.ups.now(), b.ups.opts.RetryBudget, b.ups.opts.MinRetries) {
			again = false
			nextH.breaker.Release(nextPermit)
			for _, o := range b.ups.observe {
				o.RetryBudgetExhausted(route.Prefix)
			}
		}
		if !again {
			if resp == nil {
				h.inFlight.Add(-1)
				return nil, err
			}
			resp.Body = &inFlightBody{ReadCloser: resp.Body, h: h}
			return resp, nil
		}
		if resp != nil {
			// A small answer is read so the connection can be reused; a larger or
			// unannounced one might stall, so its connection is dropped instead.
			if resp.ContentLength >= 0 && resp.ContentLength <= 4<<10 {
				io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
		}
		h.inFlight.Add(-1)
		for _, o := range b.ups.observe {
			o.Retried(route.Prefix, tg.Upstream.Host)
		}
		b.log.Info("retrying upstream request", "request_id", t.requestID, "attempt", n+1, "upstream", tg.Upstream.Host,
			"after", retryReason(resp, err), "next", route.Targets[nextI].Upstream.Host)
		if !sleepCtx(ctx, b.backoff(n)) {
			nextH.breaker.Release(nextPermit)
			return nil, context.Cause(ctx)
		}
		i, h, permit = nextI, nextH, nextPermit
	}
}

func retryReason(resp *http.Response, err error) string {
	if err != nil {
		return "transport error"
	}
	return "status " + strconv.Itoa(resp.StatusCode)
}

// backoff is exponential with full jitter: uniform in [0, min(cap, base*2^n)).
func (b *balancer) backoff(n int) time.Duration {
	ceiling := min(b.ups.opts.RetryBackoffCap, b.ups.opts.RetryBackoff<<min(n-1, 20))
	return rand.N(ceiling)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// classify tells the breaker whether the target failed. A 429 is the
// account's limit, not the target's health; a caller who left says nothing.
func classify(ctx context.Context, resp *http.Response, err error) attempt {
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != errRequestCeiling {
			return attemptNeutral
		}
		return attemptFailed
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, statusOverloaded:
		return attemptFailed
	}
	return attemptOK
}

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// aim points req at target tg: its URL below the target's base path, and its
// credential.
func (b *balancer) aim(req *http.Request, t *target, tg *Target) {
	up := tg.Upstream
	req.URL.Scheme = up.Scheme
	req.URL.Host = up.Host
	rawPath := strings.TrimSuffix(up.EscapedPath(), "/") + t.rest
	if rawPath == "" {
		rawPath = "/"
	}
	// Forward the path exactly as received: setting RawPath alongside its decoded
	// form keeps %2F and %20 as the caller wrote them.
	req.URL.RawPath = rawPath
	req.URL.Path, _ = url.PathUnescape(rawPath)
	req.Host = ""
	if t.route.CredentialHeader != "" {
		t.credential = b.credential(&t.route, tg)
		req.Header.Set(t.route.CredentialHeader, t.credential)
	}
}

// credential is what the route injects for target tg: its key in the route's format.
func (b *balancer) credential(route *Route, tg *Target) string {
	return strings.Replace(route.CredentialFormat, "{}", b.getenv(tg.CredentialEnv), 1)
}

// inFlightBody counts a response as in flight on its target until the gateway
// has finished reading it, so power of two choices sees long streams.
type inFlightBody struct {
	io.ReadCloser
	h    *health
	done atomic.Bool
}

func (b *inFlightBody) Close() error {
	if b.done.CompareAndSwap(false, true) {
		b.h.inFlight.Add(-1)
	}
	return b.ReadCloser.Close()
}

// probe GETs each target of every route with a health path, and takes a target
// out of rotation while any of its probes fails (a transport error or a 5xx).
// A target no route probes any more is back in rotation.
func (b *balancer) probe(ctx context.Context, snap *Snapshot, log *slog.Logger) {
	type check struct {
		route  Route
		target Target
	}
	checks := make(map[string]check) // target id + health path: each probed once
	for _, route := range snap.allRoutes() {
		if route.HealthPath == "" || route.Disabled != "" {
			continue
		}
		for _, tg := range route.Targets {
			if route.CredentialHeader == "" || b.getenv(tg.CredentialEnv) != "" {
				checks[tg.id+" "+route.HealthPath] = check{route, tg}
			}
		}
	}
	var mu sync.Mutex
	down := make(map[string]bool) // target id -> a probe failed
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			healthy := b.probeOne(ctx, c.route, &c.target)
			mu.Lock()
			down[c.target.id] = down[c.target.id] || !healthy
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // cut short by shutdown: the failures say nothing
	}
	for _, c := range checks {
		h := b.ups.healthOf(&c.target)
		isDown := down[c.target.id]
		if was := h.probeDown.Swap(isDown); was != isDown {
			if isDown {
				log.Warn("upstream health probe failed; target out of rotation", "upstream", c.target.Upstream.Host, "credential_env", c.target.CredentialEnv)
			} else {
				log.Info("upstream health probe passes again", "upstream", c.target.Upstream.Host, "credential_env", c.target.CredentialEnv)
			}
		}
	}
	b.ups.health.Range(func(id, h any) bool {
		if _, probed := down[id.(string)]; !probed {
			h.(*health).probeDown.Store(false)
		}
		return true
	})
}

func (b *balancer) probeOne(ctx context.Context, route Route, tg *Target) bool {
	ctx, cancel := context.WithTimeout(ctx, b.ups.opts.ProbeTimeout)
	defer cancel()
	u := *tg.Upstream
	u.Path = strings.TrimSuffix(u.Path, "/") + route.HealthPath
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false
	}
	if route.CredentialHeader != "" {
		req.Header.Set(route.CredentialHeader, b.credential(&route, tg))
	}
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		return false
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	return resp.StatusCode < 500
}

var errUnaskedUpgrade = errors.New("the upstream switched protocols though the gateway never asks it to")

// errRequestCeiling ends a request that outlived RequestTimeout.
var errRequestCeiling = errors.New("the request exceeded the gateway's overall time limit")
