package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"
)

// readinessTimeout bounds each dependency ping of /readyz; probes usually
// give up after a second or two.
const readinessTimeout = time.Second

// AdminRoutes is the operator's listener (ADMIN_ADDR), apart from tenant
// traffic: /healthz (the process answers), /readyz (it should get traffic),
// /metrics and /debug/pprof/. Nothing here authenticates, so it must not be
// reachable by tenants: it listens on loopback unless told otherwise.
func (a *App) AdminRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", a.metrics.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func (a *App) adminServer() *http.Server {
	return &http.Server{
		Handler:           onlyHosts(adminHost(a.cfg.AdminHosts))(a.AdminRoutes()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// check is one readiness condition and why it fails ("" when it holds).
type check struct {
	name, problem string
}

// readiness runs every readiness check: not draining, a config snapshot
// loaded, Postgres and (when configured) Redis answering a ping, and the
// ledger keeping up. Each failing one says why, without connection strings.
func (a *App) readiness(ctx context.Context) []check {
	checks := []check{{name: "draining"}, {name: "snapshot"}, {name: "postgres"}, {name: "ledger"}}
	if a.redis != nil {
		checks = append(checks, check{name: "redis"})
	}
	if a.draining.Load() {
		checks[0].problem = "shutting down"
	}
	if a.Snapshots.Current() == nil {
		checks[1].problem = "no config snapshot loaded"
	}
	if !a.ledger.Healthy() {
		checks[3].problem = "ledger rows are not reaching Postgres in time"
	}
	// The pings write through pointers into checks, so the slice is complete
	// before any of them starts: a later append would copy it away from them.
	var wg sync.WaitGroup
	ping := func(c *check, f func(context.Context) error) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
			defer cancel()
			if err := f(ctx); err != nil {
				c.problem = "ping failed: " + err.Error()
			}
		})
	}
	ping(&checks[2], a.pool.Ping)
	if a.redis != nil {
		ping(&checks[4], func(ctx context.Context) error { return a.redis.Ping(ctx).Err() })
	}
	wg.Wait()
	return checks
}

// readyz answers 200 when every check holds and 503 otherwise, one line per
// check. A change of verdict is logged once, not at every probe.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	var body, failed strings.Builder
	for _, c := range a.readiness(r.Context()) {
		if c.problem == "" {
			fmt.Fprintf(&body, "ok   %s\n", c.name)
			continue
		}
		fmt.Fprintf(&body, "fail %s: %s\n", c.name, c.problem)
		fmt.Fprintf(&failed, "%s: %s; ", c.name, c.problem)
	}
	if prev, _ := a.lastReadiness.Swap(failed.String()).(string); prev != failed.String() {
		if failed.Len() == 0 {
			a.log.Info("ready")
		} else {
			a.log.Warn("not ready", "failing", strings.TrimSuffix(failed.String(), "; "))
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if failed.Len() > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write([]byte(body.String()))
}
