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
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/snapshot"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/migrations"
	"github.com/tollgate/tollgate/proxy"
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
	ledger    *ledger.Writer

	closeLimiter func()
}

// New connects to Postgres, applies pending migrations and loads the first
// config snapshot. getenv supplies provider credentials at request time.
func New(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger) (*App, error) {
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
	lim, closeLimiter, err := NewLimiter(ctx, cfg, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	// The console writes through the mirrored store, so a cut-off made there
	// binds in admission at the next request.
	st := store.New(pool).WithMirror(lim, log)
	snaps, err := snapshot.New(ctx, st, pool, cfg.ConfigPollInterval, log)
	if err != nil {
		closeLimiter()
		pool.Close()
		return nil, err
	}
	lw := ledger.New(st, ledger.Options{Logger: log})
	a := &App{cfg: cfg, log: log, pool: pool, Store: st, Snapshots: snaps, ledger: lw, closeLimiter: closeLimiter}
	a.gateway = proxy.New(proxy.Options{
		Snapshots:         snaps,
		Getenv:            getenv,
		Logger:            log,
		MaxBodyBytes:      cfg.MaxRequestBodyBytes,
		MaxHeaderBytes:    cfg.MaxRequestHeaderBytes,
		StreamIdleTimeout: cfg.StreamIdleTimeout,
		Transport:         proxy.NewTransport(proxy.TransportOptions{FirstByteTimeout: cfg.UpstreamFirstByteTimeout}),
		Limiter:           lim,
		Lease:             cfg.ConcurrencyLease,
		Ledger:            lw,
		Rebuild:           a.teamState,
		MaxInflatedBytes:  cfg.MaxInflatedBodyBytes,
	})
	a.console = console.New(console.Options{Store: st, Pool: pool, Getenv: getenv, PublicURL: cfg.PublicURL, Logger: log,
		KeyRotationGrace: cfg.KeyRotationGrace})
	return a, nil
}

// Close releases the database pool and the limiter's connections.
func (a *App) Close() {
	a.closeLimiter()
	a.pool.Close()
}

// Routes is the one router: the console under /console and /static, health,
// and every other path to the gateway's team prefixes.
func (a *App) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(recoverer(a.log))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	a.console.Mount(r)
	r.Handle("/*", a.gateway)
	return r
}

// Serve runs the public listener on ln until ctx ends, keeping the config
// snapshot fresh, then drains in-flight requests for up to ShutdownTimeout.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	runCtx, stopSnapshots := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSnapshots()
	go a.Snapshots.Run(runCtx)
	// The ledger outlives the listener: requests drained at shutdown still settle,
	// and its final flush runs once they have.
	ledgerCtx, stopLedger := context.WithCancel(context.WithoutCancel(ctx))
	ledgerDone := make(chan struct{})
	go func() { a.ledger.Run(ledgerCtx, max(a.cfg.ShutdownTimeout, 5*time.Second)); close(ledgerDone) }()
	defer func() { stopLedger(); <-ledgerDone }()

	srv := &http.Server{
		Handler: a.Routes(),
		// Stops slow-header (slowloris) clients; no WriteTimeout, which would cut
		// long streams.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("shutting down: draining in-flight requests", "timeout", a.cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("app: shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
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
