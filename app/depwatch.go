package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dependency state lines: one when a dependency stops answering, one when it
// answers again, never one per failed attempt (those are the request lines'
// and go-redis's, the latter at debug level: see RedisLogger).
const (
	DependencyDownMsg = "dependency down"
	DependencyBackMsg = "dependency back"
)

// How often the watcher pings Redis: seldom while it answers (requests notice
// an outage first anyway, and an idle replica should cost Redis next to
// nothing), often while it does not, so "back" is logged promptly.
const (
	redisWatchUp   = 5 * time.Second
	redisWatchDown = time.Second
)

// depState is one dependency's up/down state, logged on change only.
type depState struct {
	name, addr, hint string
	log              *slog.Logger
	down             atomic.Bool
	since            time.Time // when it went down; the watcher's goroutine only
}

func (d *depState) failed(ctx context.Context, err error) {
	if d.down.Swap(true) {
		return
	}
	d.since = time.Now()
	d.log.LogAttrs(ctx, slog.LevelError, DependencyDownMsg, slog.String("dependency", d.name), slog.String("addr", d.addr),
		slog.String("err", err.Error()), slog.String("what_to_do", d.hint))
}

func (d *depState) answered(ctx context.Context) {
	if !d.down.Swap(false) {
		return
	}
	d.log.LogAttrs(ctx, slog.LevelInfo, DependencyBackMsg, slog.String("dependency", d.name), slog.String("addr", d.addr),
		slog.Duration("down_for", time.Since(d.since).Round(time.Millisecond)))
}

// watch pings until ctx ends, logging each change of state.
func (d *depState) watch(ctx context.Context, ping func(context.Context) error) {
	for {
		wait := redisWatchUp
		if d.down.Load() {
			wait = redisWatchDown
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			d.failed(ctx, err)
		default:
			d.answered(ctx)
		}
	}
}

func newRedisState(client redis.UniversalClient, log *slog.Logger) *depState {
	addr := "REDIS_URL"
	if c, ok := client.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return &depState{name: "redis", addr: addr, log: log, hint: RedisDownHint(addr)}
}

// RedisDown says whether Redis did not answer at the last check: fail-closed
// routes answer 503 meanwhile. False without REDIS_URL.
func (a *App) RedisDown() bool { return a.redisState != nil && a.redisState.down.Load() }

// StartHint says how to start a local Postgres or Redis (service "postgres"
// or "redis") on this kind of machine: Homebrew on a Mac, systemd where it
// runs, else the repository's docker compose file.
func StartHint(service string) string {
	switch {
	case runtime.GOOS == "darwin":
		return "brew services start " + map[string]string{"postgres": "postgresql", "redis": "redis"}[service]
	case runtime.GOOS == "linux" && isDir("/run/systemd/system"):
		return "sudo systemctl start " + map[string]string{"postgres": "postgresql", "redis": "redis-server"}[service]
	}
	return "docker compose up -d " + service
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// RedisDownHint is what to do about a Redis that does not answer at addr.
func RedisDownHint(addr string) string {
	return fmt.Sprintf("start Redis at %s (%s), point REDIS_URL at one that runs, or unset REDIS_URL for the in-process limiter (one replica only)",
		addr, StartHint("redis"))
}

// RedisLogger routes go-redis's own log (a line per failed dial, unformatted,
// on stderr) to log at debug level: the dependency state lines say what an
// operator needs, once per change. go-redis has one logger per process.
type RedisLogger struct{ Log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.Log.Enabled(ctx, slog.LevelDebug) {
		l.Log.DebugContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "source", "go-redis")
	}
}
