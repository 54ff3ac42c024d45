// Package app is the composition root: it wires Postgres, the config snapshot and
// the gateway into one chi router and runs the server's lifecycle.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/alert"
	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/metrics"
	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/app/snapshot"
	"github.com/tollgate/tollgate/app/sso"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/app/tracing"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/migrations"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/breaker"
	"github.com/tollgate/tollgate/proxy/netguard"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// App is one gateway replica.
type App struct {
	cfg       config.Config
	log       *slog.Logger
	pool      *pgxpool.Pool
	Store     *store.Store
	Snapshots *snapshot.Source
	gateway   *proxy.Gateway
	console   *console.Console
	api       *api.API
	ledger    *ledger.Writer
	live      *live.Stats  // the dashboard's live counters, summed over replicas through Redis
	late      *lateCharges // nil without Redis
	outbound  *netguard.Guard
	alerts    *alert.Worker // delivers the team's webhooks

	closeLimiter func()

	// Observability (observe.go): the admin listener's metrics and readiness,
	// the security-event handler under log, and the tracer when tracing is on.
	metrics       *metrics.Metrics
	events        *observe.Handler
	tracer        *tracing.Tracer // nil when tracing is off
	closeTracing  func(context.Context) error
	redis         redis.UniversalClient // nil without REDIS_URL; readiness pings it
	redisState    *depState             // nil without REDIS_URL
	clock         periodClock           // the limiter's, which budget periods are read on
	draining      atomic.Bool
	lastReadiness atomic.Value // string: the checks that failed at the last /readyz
}

// Option adjusts New; tests use it to capture spans.
type Option func(*options)

type options struct {
	tracerProvider trace.TracerProvider
	resilience     proxy.ResilienceOptions
	limiterNow     func() time.Time
	now            func() time.Time
	signInLimit    console.SignInLimit
}

// WithSignInLimit replaces the console's sign-in limits (tests lower them).
func WithSignInLimit(l console.SignInLimit) Option {
	return func(o *options) { o.signInLimit = l }
}

// WithClock replaces this replica's own clock (the request's start, its ledger
// row's times): tests set it apart from the limiter's, as a skewed replica has it.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithLimiterClock replaces the limiter's clock (Redis TIME): tests set it
// apart from this process's clock, as a skewed replica would have it.
func WithLimiterClock(now func() time.Time) Option {
	return func(o *options) { o.limiterNow = now }
}

// WithResilience tunes breakers, ejection, retries and probes (tests shorten them).
func WithResilience(r proxy.ResilienceOptions) Option {
	return func(o *options) { o.resilience = r }
}

// WithTracerProvider traces every request through tp, whatever the OTEL_*
// variables say (tests pass an in-memory recorder).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// New connects to Postgres, applies pending migrations and loads the first
// config snapshot. getenv supplies provider credentials at request time.
func New(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// Every component logs through the security-event handler: it adds trace
	// ids and folds bursts of security events (observe.Handler).
	var m *metrics.Metrics
	events := observe.NewHandler(log.Handler(), observe.HandlerOptions{OnEvent: func(control, outcome string) { m.SecurityEvent(control, outcome) }})
	log = slog.New(events)
	if err := migrations.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("app: database: %w", err)
	}
	if err := migrations.Apply(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	lim, redisClient, redisState, closeLimiter, err := newLimiter(ctx, cfg, log, o.limiterNow)
	if err != nil {
		pool.Close()
		return nil, err
	}
	// Every call made because an owner said so goes through one guard; Serve
	// tells it the listeners, which no route may point at.
	outbound := OutboundGuard(cfg)
	// The console writes through the mirrored store, so a cut-off made there
	// binds in admission at the next request.
	st := store.New(pool).WithGrants(cfg.CredentialGrants).WithMirror(lim, log).WithOutbound(outbound)
	snaps, err := snapshot.New(ctx, st, pool, cfg.ConfigPollInterval, log)
	if err != nil {
		closeLimiter()
		pool.Close()
		return nil, err
	}
	lopts := ledger.Options{Logger: log, SpoolDir: cfg.LedgerSpoolDir, MaxRows: cfg.LedgerSpoolMaxRows}
	redisLimiter, _ := lim.(*limiter.Redis)
	var late *lateCharges
	if redisLimiter != nil {
		late = &lateCharges{lim: redisLimiter, st: st, log: log}
		lopts.Flushed = late.flushed
	}
	lw, err := ledger.New(st, lopts)
	if err != nil {
		closeLimiter()
		pool.Close()
		return nil, err
	}
	if redisLimiter != nil {
		if err := loadWatermarks(ctx, st, lw, redisLimiter); err != nil {
			lw.Close()
			closeLimiter()
			pool.Close()
			return nil, err
		}
	}
	a := &App{cfg: cfg, log: log, pool: pool, Store: st, Snapshots: snaps, ledger: lw, late: late, clock: lim.(periodClock), closeLimiter: closeLimiter, outbound: outbound,
		events: events, redis: redisClient, redisState: redisState, closeTracing: func(context.Context) error { return nil }}
	var redisStats func() limiter.Stats
	if redisLimiter != nil {
		redisStats = redisLimiter.Stats
	}
	m = metrics.New(metrics.Options{Snapshots: snaps, Ledger: lw, RedisStats: redisStats})
	a.metrics = m
	// Reuse is just under the console's one-second push, so every open page of
	// a team shares one read per second.
	a.live = live.New(redisClient, live.Options{Prefix: cfg.RedisKeyPrefix, Logger: log, Reuse: 900 * time.Millisecond})
	if err := a.startTracing(ctx, o.tracerProvider); err != nil {
		a.Close()
		return nil, err
	}
	var limits *providerlimits.Tracker
	if cfg.ProviderRateLimits {
		limits = providerlimits.New(providerlimits.Options{MaxWait: offIsNegative(cfg.ProviderLimitWait), Share: cfg.Replicas})
		if redisClient != nil {
			limits.Share(redisClient, providerlimits.ShareOptions{Prefix: cfg.RedisKeyPrefix, Logger: log})
		}
	}
	transport, observers, gatewayLimiter := a.instrument(proxy.NewTransport(proxy.TransportOptions{FirstByteTimeout: offIsNegative(cfg.UpstreamFirstByteTimeout),
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes, Guard: outbound}), lim)
	a.gateway = proxy.New(proxy.Options{
		Snapshots:         snaps,
		Getenv:            getenv,
		Logger:            log,
		MaxBodyBytes:      offIsNegative(cfg.MaxRequestBodyBytes),
		BodyReadTimeout:   cfg.BodyReadTimeout,
		MaxHeaderBytes:    cfg.MaxRequestHeaderBytes,
		StreamIdleTimeout: offIsNegative(cfg.StreamIdleTimeout),
		RequestTimeout:    cfg.RequestTimeout,
		MaxResponseBytes:  cfg.MaxResponseBytes,
		MaxStreamBytes:    cfg.MaxStreamBytes,
		MaxInFlight:       cfg.MaxInFlight,
		MemberMaxInFlight: cfg.MemberMaxInFlight,
		MemberQueueDepth:  cfg.MemberQueueDepth,
		MemberQueueWait:   cfg.MemberQueueWait,
		QueueWait:         cfg.FairQueueWait,
		Transport:         transport,
		Limiter:           gatewayLimiter,
		Lease:             cfg.ConcurrencyLease,
		Ledger:            lw,
		Rebuild:           a.teamState,
		Now:               o.now,
		MaxInflatedBytes:  offIsNegative(cfg.MaxInflatedBodyBytes),
		Observers:         append(observers, a.live),
		Resilience:        o.resilience,
		ProviderLimits:    limits,
		UpstreamObservers: []proxy.UpstreamObserver{m, upstreamLog{log}},
	})
	m.WatchSettles(a.gateway.SettleStats)
	m.WatchProviderLimits(a.gateway.ProviderLimitStats)
	a.console = console.New(console.Options{Store: st, Pool: pool, Getenv: getenv, PublicURL: cfg.PublicURL, Logger: log,
		KeyRotationGrace: cfg.KeyRotationGrace, Live: a.live, SSO: sso.Options{Outbound: outbound}, SignInLimit: o.signInLimit,
		Redis: redisClient, RedisKeyPrefix: cfg.RedisKeyPrefix, ClientIPHeader: cfg.ClientIPHeader})
	// Webhook URLs are owners' input: every delivery dials through the guard.
	a.alerts = alert.New(st, outbound.Client(0), alert.Options{Logger: log})
	a.api = api.New(api.Options{Store: st, Limiter: lim, Redis: redisLimiter, Logger: log, PublicURL: cfg.PublicURL,
		KeyRotationGrace: cfg.KeyRotationGrace})
	return a, nil
}

// OutboundGuard is the guard for cfg: OUTBOUND_ALLOW, and the configured
// listen addresses as the gateway's own (Serve adds the listeners it is given).
// The CLI checks what it saves with it as the gateway does.
func OutboundGuard(cfg config.Config) *netguard.Guard {
	g := netguard.New(netguard.Options{Allow: cfg.OutboundAllow})
	for _, addr := range []string{cfg.ListenAddr, cfg.AdminAddr} {
		host, port, err := net.SplitHostPort(addr)
		if n, perr := strconv.Atoi(port); err == nil && perr == nil {
			// A name is not resolved here: taken as every interface, which it is one of.
			g.Register(&net.TCPAddr{IP: net.ParseIP(host), Port: n})
		}
	}
	return g
}

// Outbound is the replica's outbound guard.
func (a *App) Outbound() *netguard.Guard { return a.outbound }

// Close sends the spans still buffered and releases the database pool and the
// limiter's connections.
func (a *App) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.closeTracing(ctx); err != nil {
		a.log.Warn("spans not exported at shutdown", "err", err)
	}
	a.closeLimiter()
	a.ledger.Close()
	a.pool.Close()
}

// Routes is the one router: the console under /console and /static, the
// admin API under /api/v1, health, and every other path to the gateway's team
// prefixes.
func (a *App) Routes() http.Handler {
	r := chi.NewRouter()
	if a.tracer != nil {
		r.Use(a.tracer.Middleware)
	}
	r.Use(recoverer(a.log))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	// The console and the admin API answer only under PUBLIC_URL's host; the
	// gateway's routes answer under any, since SDKs use whatever name reaches it.
	r.Group(func(r chi.Router) {
		r.Use(onlyHosts(publicHost(a.cfg.PublicURL)))
		r.Use(a.reloadBeforeAnswer)
		a.console.Mount(r)
		a.api.Mount(r)
	})
	r.Handle("/*", a.gateway)
	return r
}

// reloadBeforeAnswer makes a change this replica acknowledges visible to its
// own gateway before the answer leaves: a key issued or a route added here
// works here at once, rather than after the NOTIFY round trip (other
// replicas still take that, milliseconds). Only changes that succeeded reload.
func (a *App) reloadBeforeAnswer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&reloadingWriter{ResponseWriter: w, reload: func() {
			if err := a.Snapshots.Reload(r.Context()); err != nil {
				a.log.Warn("config reload after a change failed; the change reaches this replica with the next notification", "err", err)
			}
		}}, r)
	})
}

// reloadingWriter runs reload once, just before a successful answer's header
// is written.
type reloadingWriter struct {
	http.ResponseWriter
	reload func()
	done   bool
}

func (w *reloadingWriter) WriteHeader(status int) {
	if !w.done {
		w.done = true
		if status < http.StatusBadRequest {
			w.reload()
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *reloadingWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *reloadingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Serve runs the public listener ln, and the admin listener admin unless it
// is nil, until ctx ends, keeping the config snapshot fresh. Then it drains:
// /readyz turns 503 at once, the public listener keeps serving for DrainDelay
// so load balancers see that and stop sending, then it stops accepting and
// waits up to ShutdownTimeout for in-flight requests; the admin listener
// answers until they are done.
func (a *App) Serve(ctx context.Context, ln, admin net.Listener) error {
	a.outbound.Register(ln.Addr())
	if admin != nil {
		a.outbound.Register(admin.Addr())
	}
	runCtx, stopSnapshots := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSnapshots()
	go a.Snapshots.Run(runCtx)
	go a.gateway.RunHealthProbes(runCtx)
	go a.gateway.RunProviderLimits(runCtx)
	if a.late != nil {
		go a.late.watch(runCtx)
	}
	if a.redisState != nil {
		go a.redisState.watch(runCtx, func(ctx context.Context) error { return a.redis.Ping(ctx).Err() })
	}
	go a.alerts.Run(runCtx)
	// The ledger outlives the listener: requests drained at shutdown still settle,
	// and its final flush runs once they have.
	ledgerCtx, stopLedger := context.WithCancel(context.WithoutCancel(ctx))
	ledgerDone := make(chan struct{})
	go func() { a.ledger.Run(ledgerCtx, max(a.cfg.ShutdownTimeout, 5*time.Second)); close(ledgerDone) }()
	defer func() { stopLedger(); <-ledgerDone; a.ledger.Close() }()
	// So do the security-event summaries: drained requests may still refuse.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	eventsDone := make(chan struct{})
	go func() { a.events.Run(eventsCtx); close(eventsDone) }()
	defer func() { stopEvents(); <-eventsDone }()
	liveCtx, stopLive := context.WithCancel(context.WithoutCancel(ctx))
	liveDone := make(chan struct{})
	go func() { a.live.Run(liveCtx); close(liveDone) }()
	defer func() { stopLive(); <-liveDone }()

	srv := &http.Server{
		Handler: a.Routes(),
		// Stops slow-header (slowloris) clients; no WriteTimeout, which would cut
		// long streams.
		ReadHeaderTimeout: a.cfg.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	// Dashboard streams would otherwise hold Shutdown until its timeout.
	srv.RegisterOnShutdown(a.console.CloseStreams)
	ln = proxy.GuardFraming(srv, ln)
	// Either server failing ends Serve; the deferred Closes stop the other.
	errc := make(chan error, 2)
	servers := 1
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()
	var adminSrv *http.Server
	if admin != nil {
		servers++
		adminSrv = a.adminServer()
		go func() { errc <- adminSrv.Serve(admin) }()
		defer adminSrv.Close()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.draining.Store(true)
	if a.cfg.DrainDelay > 0 {
		a.log.Info("draining: /readyz answers 503; still serving until the delay ends", "delay", a.cfg.DrainDelay)
		select {
		case <-time.After(a.cfg.DrainDelay):
		case err := <-errc:
			return err
		}
	}
	a.log.Info("shutting down: draining in-flight requests", "timeout", a.cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("app: shutdown: %w", err)
	}
	// The last responses' settles are queued: run them before the process ends,
	// or their holds are charged in full when their leases end.
	if err := a.gateway.DrainSettles(shutdownCtx); err != nil {
		a.log.Error("settles still queued at shutdown: their holds are charged in full when their leases end", "err", err)
	}
	if adminSrv != nil {
		adminCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = adminSrv.Shutdown(adminCtx)
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// recoverer turns a panic into a 500 and a log line, but lets http.ErrAbortHandler
// through: ReverseProxy uses it to cut a stream whose upstream failed, which must
// reach the client as a broken stream, not a tidy response.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "panic", v, "path", r.URL.Path)
				proxy.WriteError(w, proxy.DialectOpenAI, &proxy.Error{Kind: proxy.KindInternal, Message: "internal error"})
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// offIsNegative maps config's "0 switches it off" to the proxy's "negative
// switches it off, zero takes the default".
func offIsNegative[T int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// upstreamLog logs what the resilience machinery does: an operator reading the
// logs of an outage sees the breakers trip and close.
type upstreamLog struct{ log *slog.Logger }

func (u upstreamLog) BreakerChanged(upstream, credentialEnv string, from, to breaker.State) {
	level := slog.LevelWarn
	if to == breaker.Closed {
		level = slog.LevelInfo
	}
	u.log.Log(context.Background(), level, "upstream circuit breaker "+to.String(), "upstream", upstream,
		"credential_env", credentialEnv, "from", from.String())
}

func (u upstreamLog) Ejected(upstream, credentialEnv string, ejectFor time.Duration) {
	u.log.Warn("upstream target ejected after consecutive failures", "upstream", upstream, "credential_env", credentialEnv, "for", ejectFor)
}

func (upstreamLog) Retried(string, string) {}

func (u upstreamLog) RetryBudgetExhausted(route string) {
	u.log.Warn("retry budget exhausted: failing upstream requests are not retried", "route", route)
}
