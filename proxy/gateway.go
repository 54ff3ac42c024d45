// Package proxy is tollgate's data path: authenticate a member key, resolve the
// team's route, bound the request, inject the provider credential and stream the
// upstream's answer back.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy/netguard"
	"github.com/tollgate/tollgate/proxy/providerlimits"
	"github.com/tollgate/tollgate/proxy/usage"
)

// Options configure a Gateway. Zero durations and sizes take the defaults noted.
type Options struct {
	Snapshots Source
	// Getenv reads provider credentials; injected so tests never touch the process
	// environment. Defaults to os.Getenv via the caller.
	Getenv func(string) string
	Logger *slog.Logger
	// MaxBodyBytes bounds the request body on the wire (default 8 MiB; negative: off).
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading the request body, so a client dribbling its
	// body cannot hold a slot forever (0: off).
	BodyReadTimeout time.Duration
	// MaxHeaderBytes bounds the request headers (default 64 KiB); larger gets a
	// provider-shaped 431 instead of Go's plain-text one.
	MaxHeaderBytes int
	// StreamIdleTimeout ends a response whose upstream sends nothing for this long
	// (default 2m; negative: off).
	StreamIdleTimeout time.Duration
	// RequestTimeout is the ceiling on one request from admission to its last
	// byte (0: off). It is far above the idle timeout: a healthy stream may run
	// for many minutes, but not for ever.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds a non-streamed upstream response, MaxStreamBytes a
	// streamed one (0: off): the gateway must not become an amplifier.
	MaxResponseBytes int64
	MaxStreamBytes   int64
	// MaxInFlight sheds requests past this many being served at once with 503
	// (0: off).
	MaxInFlight int
	// MemberMaxInFlight bounds one member's requests in flight on this replica;
	// up to MemberQueueDepth more wait up to MemberQueueWait for a slot (0: off).
	MemberMaxInFlight int
	MemberQueueDepth  int
	MemberQueueWait   time.Duration
	// Resilience tunes breakers, ejection, retries and health probes.
	Resilience ResilienceOptions
	// ProviderLimits tracks the provider accounts' own rate limits, so requests
	// are not sent into a known 429 (default nil: not tracked).
	ProviderLimits *providerlimits.Tracker
	// UpstreamObservers learn of breaker transitions, ejections and retries.
	UpstreamObservers []UpstreamObserver
	// Transport carries upstream requests (default NewTransport(TransportOptions{})).
	Transport http.RoundTripper
	// Now is this replica's clock: key expiry and the ledger row's times (default
	// time.Now), except its created_at, which is the limiter's clock when it has
	// one (Decision.At): budget periods are read on the limiter's.
	Now func() time.Time
	// Limiter admits each request: revocation, cut-off, rate and concurrency, in
	// one call (default an in-process limiter, right only for a single replica).
	Limiter limiter.Limiter
	// Lease bounds how long a request holds its concurrency slot and its spend
	// hold (default 15m); a hold whose lease ends unsettled is charged in full.
	Lease time.Duration
	// QueueWait is how long a request refused only by its team's rate, TPM or
	// concurrency limit may wait in the team's weighted fair waiting room before
	// it is answered 429 (0: off). Keep it far below the callers' own timeouts.
	QueueWait time.Duration
	// Ledger records every paid request's hold and settlement (required for paid
	// routes; default discards, for tests of the unpaid data path).
	Ledger Ledger
	// Rebuild computes a team's spend from the durable ledger when Redis has lost
	// its counters (default: none, the request fails with 503).
	Rebuild func(ctx context.Context, teamID int64) (limiter.TeamState, error)
	// MaxInflatedBytes bounds a compressed body once inflated for estimation
	// (default 32 MiB; negative: off).
	MaxInflatedBytes int64
	// Observers learn of every request (metrics, live dashboard, access log).
	Observers []Observer
}

// Gateway is the http.Handler for every provider route.
type Gateway struct {
	opts     Options
	proxy    *httputil.ReverseProxy
	balancer *balancer
	inFlight inFlightCap
	members  *memberGates
	settles  *settles
}

// New builds a Gateway.
func New(opts Options) *Gateway {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 8 << 20
	}
	if opts.MaxHeaderBytes == 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = 2 * time.Minute
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport(TransportOptions{})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Limiter == nil {
		opts.Limiter = limiter.NewLocal(nil)
	}
	if opts.Lease == 0 {
		opts.Lease = 15 * time.Minute
	}
	if opts.Ledger == nil {
		opts.Ledger = discardLedger{}
	}
	if opts.MaxInflatedBytes == 0 {
		opts.MaxInflatedBytes = 32 << 20
	}
	if opts.MaxInflatedBytes < 0 {
		opts.MaxInflatedBytes = math.MaxInt64
	}
	g := &Gateway{opts: opts, inFlight: inFlightCap{limit: int64(opts.MaxInFlight)},
		members: newMemberGates(opts.MemberMaxInFlight, opts.MemberQueueDepth, opts.MemberQueueWait),
		settles: newSettles(opts.Limiter, opts.Logger)}
	g.balancer = &balancer{next: opts.Transport, getenv: opts.Getenv, log: opts.Logger, limits: opts.ProviderLimits,
		ups: newUpstreams(opts.Resilience, opts.Now, opts.UpstreamObservers)}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      g.balancer,
		ModifyResponse: g.modifyResponse,
		BufferPool:     newCopyBuffers(),
		ErrorHandler:   g.upstreamError,
		ErrorLog:       slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	return g
}

// RequestIDHeader carries the gateway's own id for each request back to the caller.
const RequestIDHeader = "X-Tollgate-Request-Id"

// target is what the gateway decided for one request; Rewrite and ModifyResponse
// read it from the request context.
type target struct {
	requestID  string
	start      time.Time // the ledger's created_at: the limiter's Decision.At, else Options.Now
	began      time.Time // time.Now, for durations
	key        Key
	route      Route
	rest       string // escaped path below the route prefix
	credential string // the attempt's target's, set by the balancer
	meter      meter
	// settles is set once admitted when the limiter has something to settle
	// (limiter.Request.Settles).
	settles bool
	// teamEpoch and seq are the generation of the team's counters admission
	// read (limiter.Decision's TeamEpoch, Seq), for the ledger rows.
	teamEpoch, seq int64
	cancel         context.CancelCauseFunc
	// ctx is the request's context as handed to ReverseProxy, before it adds
	// its 1xx forwarding; attempts that may be retried use it.
	ctx context.Context

	// Set while proxying, read after ReverseProxy.ServeHTTP returns.
	sent   atomic.Bool // request headers reached the upstream
	status int         // the upstream's status; 0 if it never answered
	ttfb   time.Duration
	tap    *usage.Tap // reads the usage from a metered response
	failed string     // Outcome.UpstreamError
	// The first attempt's claim on its target's provider capacity.
	reservation providerlimits.Reservation
	// queued is how long the request waited: in its team's waiting room, then
	// for its provider account's capacity.
	queued time.Duration
}

type targetKey struct{}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w}
	o := &Outcome{Start: time.Now().UTC(), Method: r.Method, BudgetRemaining: -1, Ctx: r.Context(), ClientAddr: clientAddr(r)}
	defer func() {
		o.Status, o.Duration = rec.status, time.Since(o.Start)
		for _, obs := range g.opts.Observers {
			obs.Finished(*o)
		}
	}()
	g.serve(rec, r, o)
}

// serve answers one request, filling in o as it learns what happened. It is
// split in three so that what stays on a stream's stack for its whole life is
// small: prepare's large frame (authentication, metering, admission) is gone
// before forward hands the request to the ReverseProxy. That keeps a stream's
// goroutine stack at 16 KiB rather than 32 (the runtime halves a stack only
// while less than a quarter of it is in use).
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, o *Outcome) {
	requestID := newRequestID()
	o.RequestID = requestID
	w.Header().Set(RequestIDHeader, requestID)
	if !g.inFlight.enter() {
		o.Refusal = "shed"
		w.Header().Set("Retry-After", "1")
		WriteError(w, guessDialect(r), &Error{Kind: KindUnavailable, Message: "the gateway is at its limit of " +
			strconv.FormatInt(g.inFlight.limit, 10) + " requests in flight (MAX_IN_FLIGHT); retry shortly"})
		return
	}
	defer g.inFlight.leave()
	t, epoch, release := g.prepare(w, r, o, requestID)
	if t == nil {
		return
	}
	defer release()
	o.Admitted = true
	for _, obs := range g.opts.Observers {
		obs.Started(t.key.TeamID, t.key.MemberID)
	}
	defer g.settle(r, t, epoch, o)
	// Runs before settle, also when ReverseProxy aborts a cut response by panicking.
	defer func() {
		if t.failed == "" && t.ctx != nil {
			t.failed = cutReason(context.Cause(t.ctx))
		}
	}()
	g.forward(w, r, t)
}

// prepare authenticates, routes, meters and admits the request. It answers a
// refusal itself and returns a nil target; otherwise it records the paid
// request's hold in the ledger and returns its target, the epoch its hold was
// placed in, and the release of its member's in-flight slot.
func (g *Gateway) prepare(w http.ResponseWriter, r *http.Request, o *Outcome, requestID string) (*target, int64, func()) {
	dialect := guessDialect(r)
	refuse := func(d Dialect, code string, err *Error) {
		o.Refusal = code
		WriteError(w, d, err)
	}
	if err := checkRequestShape(r, g.opts.MaxHeaderBytes); err != nil {
		refuse(dialect, "bad_request", err)
		return nil, 0, nil
	}
	snap := g.opts.Snapshots.Current()
	key, member, err := g.authenticate(r, snap)
	// Set for a revoked, expired or cut-off key too: its caller proved they hold it.
	o.TeamID, o.MemberID, o.KeyID = key.TeamID, key.MemberID, key.ID
	if err != nil {
		o.CredentialFault = err.fault
		refuse(dialect, err.code, err)
		return nil, 0, nil
	}
	o.KeyInGrace = !key.ExpiresAt.IsZero()
	route, rest, ok := snap.MatchRoute(key.TeamID, r.URL.EscapedPath())
	if !ok {
		refuse(dialect, "no_route", &Error{Kind: KindNotFound, Message: "no route for " + r.URL.EscapedPath() + " on this gateway for your team"})
		return nil, 0, nil
	}
	o.RouteID, o.RoutePrefix = route.ID, route.Prefix
	dialect = route.Dialect
	if route.Disabled != "" {
		refuse(dialect, "route_disabled", &Error{Kind: KindPermission, Message: "route " + route.Prefix +
			" is disabled by the gateway: " + route.Disabled + "; ask a team owner"})
		return nil, 0, nil
	}
	if missing := g.missingCredential(route); missing != "" {
		g.opts.Logger.Error("provider credential missing", "request_id", requestID, "route", route.Prefix, "env", missing)
		refuse(dialect, "no_credential", &Error{Kind: KindUnavailable, Message: "the gateway has no provider credential for this route; ask the owner to set " + missing})
		return nil, 0, nil
	}
	release, gateErr := g.members.enter(r.Context(), key.MemberID)
	if gateErr != nil {
		w.Header().Set("Retry-After", "1")
		refuse(dialect, gateErr.code, gateErr)
		return nil, 0, nil
	}
	admitted := false
	defer func() {
		if !admitted {
			release()
		}
	}()
	body, berr := g.readBody(w, r)
	if berr != nil {
		refuse(dialect, "bad_body", berr)
		return nil, 0, nil
	}
	m, merr := g.meterRequest(r, body, route, rest, snap)
	if merr != nil {
		refuse(dialect, "bad_body", merr)
		return nil, 0, nil
	}
	o.Model, o.HeldMicros = m.model, m.hold
	if m.paid && !g.opts.Ledger.Healthy() {
		w.Header().Set("Retry-After", "5")
		refuse(dialect, "ledger_unavailable", &Error{Kind: KindUnavailable, Message: "the gateway cannot record spend right now; retry shortly"})
		return nil, 0, nil
	}
	t := &target{requestID: requestID, start: g.opts.Now().UTC(), began: time.Now(), key: key, route: route, rest: rest, meter: m}
	team, _ := snap.Team(key.TeamID)
	dec, admitted := g.admit(w, r, dialect, member, team, t)
	o.BudgetRemaining, o.Queued, o.HeldMicros = dec.BudgetRemaining, t.queued, t.meter.hold
	if !admitted {
		o.Refusal, o.RefusalScope = string(dec.Reason), string(dec.Scope)
		return nil, 0, nil
	}
	if !key.ExpiresAt.IsZero() {
		// RFC 9745 Deprecation and RFC 8594 Sunset: the key was rotated and stops
		// working at the end of its grace window.
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Sunset", key.ExpiresAt.UTC().Format(http.TimeFormat))
	}
	t.teamEpoch, t.seq = dec.TeamEpoch, dec.Seq
	if m.paid {
		g.opts.Ledger.Record(t.ledgerEntry(LedgerHeld, 0))
	}
	return t, dec.Epoch, release
}

// forward sends the admitted request upstream through the ReverseProxy and
// relays the answer; it returns when the response is done.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, t *target) {
	// Reading the whole body first already avoids the ReverseProxy truncation of
	// streamed POSTs (golang/go#40747); full duplex keeps it so if bodies ever stream.
	http.NewResponseController(w).EnableFullDuplex()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	t.cancel = cancel
	if g.opts.RequestTimeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, g.opts.RequestTimeout, errRequestCeiling)
		defer stop()
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { t.sent.Store(true) }})
	t.ctx = context.WithValue(ctx, targetKey{}, t)
	g.proxy.ServeHTTP(w, r.WithContext(t.ctx))
}

// RunHealthProbes probes the targets of routes that have a health path every
// ProbeInterval until ctx ends.
func (g *Gateway) RunHealthProbes(ctx context.Context) {
	ticker := time.NewTicker(g.balancer.ups.opts.ProbeInterval)
	defer ticker.Stop()
	for {
		g.balancer.probe(ctx, g.opts.Snapshots.Current(), g.opts.Logger)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// checkRequestShape refuses what must never be forwarded whatever the key.
func checkRequestShape(r *http.Request, maxHeaderBytes int) *Error {
	size := len(r.Method) + len(r.RequestURI)
	for name, values := range r.Header {
		for _, v := range values {
			size += len(name) + len(v) + 4
		}
	}
	if size > maxHeaderBytes {
		return &Error{Kind: KindTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge, Message: "request headers exceed " + strconv.Itoa(maxHeaderBytes) + " bytes"}
	}
	if err := checkPath(r.URL.EscapedPath()); err != nil {
		return err
	}
	if r.Header.Get("Upgrade") != "" {
		return &Error{Kind: KindInvalidRequest, Message: "protocol upgrades are not supported through the gateway"}
	}
	return nil
}

// readBody reads the bounded body so it is forwarded with a known length and can
// be inspected before anything goes upstream; it returns the body, which the
// request then carries (setBody).
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := g.opts.MaxBodyBytes
	if limit < 0 {
		limit = math.MaxInt64
	}
	if r.ContentLength > limit {
		return nil, g.bodyTooLarge()
	}
	rc := http.NewResponseController(w)
	// Without support the server's own timeouts still apply.
	deadline := g.opts.BodyReadTimeout > 0 && rc.SetReadDeadline(time.Now().Add(g.opts.BodyReadTimeout)) == nil
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if deadline && err == nil {
		// Only then: a connection whose body timed out must close, not wait
		// for the rest of a body that is not coming.
		rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, g.bodyTooLarge()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return nil, &Error{Kind: KindTimeout, Status: http.StatusRequestTimeout, Message: "the request body did not arrive within " +
				g.opts.BodyReadTimeout.String() + " (BODY_READ_TIMEOUT)"}
		}
		return nil, &Error{Kind: KindInvalidRequest, Message: "could not read the request body"}
	}
	r.Header.Del("Transfer-Encoding")
	setBody(r, body)
	return body, nil
}

func (g *Gateway) bodyTooLarge() *Error {
	return &Error{Kind: KindTooLarge, Message: "request body exceeds " + strconv.FormatInt(g.opts.MaxBodyBytes, 10) + " bytes (MAX_REQUEST_BODY_BYTES)"}
}

// readAll is io.ReadAll into one buffer of the declared length (plus one byte to
// see the end) when the caller declared it, instead of growing from 512 bytes.
func readAll(r io.Reader, declared int64) ([]byte, error) {
	// A declared length is the caller's word: past 8 MiB (only with the body
	// bound off) the buffer grows as bytes really arrive.
	if declared < 0 || declared > 8<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, declared+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // a body longer than declared: let append grow it
		}
	}
}

// Headers that may carry a caller's credential; none of them goes upstream.
var callerCredentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie"}

// rewrite prepares what every attempt shares; the balancer aims each attempt
// at a target and adds that target's credential.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	out := pr.Out
	out.URL.RawQuery = pr.In.URL.RawQuery
	for _, h := range callerCredentialHeaders {
		out.Header.Del(h)
	}
	// The upstream's own log can then be reconciled with the ledger row by row.
	out.Header.Set(RequestIDHeader, t.requestID)
	if t.route.CredentialHeader != "" && out.Header.Get("Accept-Encoding") != "identity" {
		// The body is searched for the credential (redactingBody), so it must
		// arrive readable: Go's transport then asks for gzip and inflates it.
		out.Header.Del("Accept-Encoding")
	}
}

// missingCredential names the credential variable the route needs and lacks:
// "" when the route injects none or at least one target's is set.
func (g *Gateway) missingCredential(route Route) string {
	if route.CredentialHeader == "" {
		return ""
	}
	for _, tg := range route.Targets {
		if CredentialEnvAllowed(tg.CredentialEnv) && g.opts.Getenv(tg.CredentialEnv) != "" {
			return ""
		}
	}
	return route.Targets[0].CredentialEnv
}

func (g *Gateway) modifyResponse(resp *http.Response) error {
	t := resp.Request.Context().Value(targetKey{}).(*target)
	t.status, t.ttfb = resp.StatusCode, time.Since(t.began)
	setQueued(resp.Header, t)
	// An upstream that reflects request headers must not hand the credential
	// back, nor may any upstream set cookies on the gateway's origin.
	secret := injectedSecret(&t.route, t.credential)
	scrubHeader(resp.Header, secret)
	scrubHeader(resp.Trailer, secret) // the names announced; the values at Close
	if ce := resp.Header.Get("Content-Encoding"); secret != "" && ce != "" && !strings.EqualFold(ce, "identity") &&
		resp.ContentLength != 0 && resp.Request.Method != http.MethodHead {
		return &unreadableBody{encoding: ce}
	}
	streamed := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	limit := g.opts.MaxResponseBytes
	if streamed {
		limit = g.opts.MaxStreamBytes
	}
	if limit > 0 && resp.ContentLength > limit {
		return &responseTooLarge{limit: limit, streamed: streamed}
	}
	if t.meter.priced {
		t.tap = usage.NewTap(t.meter.kind, resp.Header.Get("Content-Type"), resp.Body)
		if t.meter.addedUsage && t.tap.DropUsageChunk() {
			// The caller sees the stream it asked for, so it is shorter than sent.
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
		}
		resp.Body = t.tap
	}
	if secret != "" {
		resp.Body = newRedactingBody(resp.Body, secret)
	}
	resp.Body = newWatchedBody(resp.Body, g.opts.StreamIdleTimeout, limit, streamed, t.cancel, resp, secret)
	return nil
}

// cutReason names why the gateway ended a response that had started, for
// Outcome.UpstreamError; "" when it was not the gateway.
func cutReason(cause error) string {
	switch {
	case cause == errStreamIdle:
		return "stream_idle"
	case cause == errRequestCeiling:
		return "request_timeout"
	case errors.As(cause, new(*responseTooLarge)):
		return "response_too_large"
	}
	return ""
}

// unreadableBody refuses a body compressed in a way the gateway did not ask
// for: it could not be searched for the credential.
type unreadableBody struct{ encoding string }

func (e *unreadableBody) Error() string {
	return "the upstream sent a body in an encoding the gateway did not ask for (" + e.encoding + ")"
}

// responseTooLarge ends a response past MaxResponseBytes or MaxStreamBytes.
type responseTooLarge struct {
	limit    int64
	streamed bool
}

func (e *responseTooLarge) Error() string {
	if e.streamed {
		return "the upstream's stream exceeded " + strconv.FormatInt(e.limit, 10) + " bytes (MAX_STREAM_BYTES)"
	}
	return "the upstream's response exceeds " + strconv.FormatInt(e.limit, 10) + " bytes (MAX_RESPONSE_BYTES)"
}

var errStreamIdle = errors.New("upstream sent nothing within the stream idle timeout")

func (g *Gateway) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	t := r.Context().Value(targetKey{}).(*target)
	log := g.opts.Logger.With("request_id", t.requestID, "route", t.route.Prefix)
	if cause := context.Cause(r.Context()); r.Context().Err() != nil && cause != errStreamIdle && cause != errRequestCeiling {
		t.failed = "client_gone"
		log.Info("client went away before the upstream answered")
		return
	}
	var e *Error
	var netErr net.Error
	switch {
	case errors.As(err, new(*errNoTarget)):
		noTarget, _ := errors.AsType[*errNoTarget](err)
		t.failed = "circuit_open"
		setRetryHeaders(w.Header(), noTarget.retryIn)
		e = &Error{Kind: KindUnavailable, Message: "the upstream is failing, so the gateway is not sending it traffic for now; retry after " +
			strconv.FormatInt(ceilSeconds(noTarget.retryIn), 10) + "s"}
	case errors.As(err, new(*errProviderLimited)):
		limited, _ := errors.AsType[*errProviderLimited](err)
		t.failed = "provider_limited"
		setRetryHeaders(w.Header(), limited.retryIn)
		e = &Error{Kind: KindRateLimit, Message: "the provider account's rate limit for this route is reached, so the gateway did not send the request; retry after " +
			strconv.FormatInt(ceilMillis(limited.retryIn), 10) + " ms"}
	case errors.As(err, new(*responseTooLarge)):
		t.failed = "response_too_large"
		e = &Error{Kind: KindUpstream, Message: err.Error()}
	case context.Cause(r.Context()) == errRequestCeiling:
		t.failed = "request_timeout"
		e = &Error{Kind: KindTimeout, Message: "the request exceeded the gateway's overall time limit (REQUEST_TIMEOUT)"}
	case errors.Is(err, netguard.ErrForbidden):
		t.failed = "forbidden_address"
		e = &Error{Kind: KindUpstream, Message: "the route's upstream resolves to an address the gateway refuses to call"}
	case errors.As(err, new(*unreadableBody)):
		t.failed = "unreadable_body"
		e = &Error{Kind: KindUpstream, Message: err.Error()}
	case responseHeaderTooLarge(err):
		t.failed = "response_headers_too_large"
		e = &Error{Kind: KindUpstream, Message: "the upstream's response headers exceed the gateway's bound (MAX_RESPONSE_HEADER_BYTES)"}
	case errors.Is(err, errStreamIdle), errors.As(err, &netErr) && netErr.Timeout():
		t.failed = "timeout"
		e = &Error{Kind: KindTimeout, Message: "the upstream did not answer in time"}
	default:
		t.failed = "unreachable"
		e = &Error{Kind: KindUpstream, Message: "the upstream could not be reached"}
	}
	level := slog.LevelWarn
	if t.failed == "provider_limited" {
		level = slog.LevelInfo // a refusal, as a member's limit is, not a failure
	}
	log.Log(r.Context(), level, "upstream request failed", "err", redact(err.Error(), t.credential))
	setQueued(w.Header(), t)
	WriteError(w, t.route.Dialect, e)
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// newRequestID is "req_" and 24 random hex digits, built in one allocation.
func newRequestID() string {
	var raw [12]byte
	rand.Read(raw[:])
	var id [4 + 24]byte
	copy(id[:], "req_")
	hex.Encode(id[4:], raw[:])
	return string(id[:])
}
