// Package apptest starts real gateway replicas inside a test: the whole app on a
// loopback listener, on the test's own schema, with its logs captured so a test
// can search them. Test-only: never imported by non-test code.
package apptest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// LoopbackAllow is the OUTBOUND_ALLOW replicas get unless the test sets it:
// the tests' httptest upstreams listen on loopback.
const LoopbackAllow = "127.0.0.0/8,::1"

// Outbound is the guard a replica builds from LoopbackAllow, for tests that
// build a store or a console without one.
func Outbound() *netguard.Guard {
	allow, err := netguard.ParseAllow(LoopbackAllow)
	if err != nil {
		panic(err) // a constant
	}
	return netguard.New(netguard.Options{Allow: allow})
}

// Replica is one running gateway.
type Replica struct {
	URL  string
	App  *app.App
	Logs *SyncBuffer
	// Stop begins a graceful shutdown, as SIGTERM does, and returns what Serve
	// returned once the drain is over.
	Stop func() error
}

// Start runs a replica against databaseURL until the test ends. env overrides
// configuration variables and supplies provider credentials; nothing is read
// from the process environment. opts go to app.New.
func Start(t testing.TB, databaseURL string, env map[string]string, opts ...app.Option) *Replica {
	t.Helper()
	a, logs, ctx, cancel := boot(t, databaseURL, env, opts...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("apptest: listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln, nil) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(60 * time.Second):
				serveErr = errors.New("apptest: replica did not shut down")
			}
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("apptest: serve: %v", err)
		}
		a.Close()
	})
	return &Replica{URL: "http://" + ln.Addr().String(), App: a, Logs: logs, Stop: stop}
}

// boot builds a replica's app the way every starter here does: configuration
// from env only (DRAIN_DELAY 0s and a ledger spool of its own unless env sets
// them, so no replica replays another test's rows; OUTBOUND_ALLOW loopback,
// where the tests' upstreams listen), logs captured in memory.
// The context it returns ends the replica's Serve when cancelled.
func boot(t testing.TB, databaseURL string, env map[string]string, opts ...app.Option) (*app.App, *SyncBuffer, context.Context, context.CancelFunc) {
	t.Helper()
	vars := map[string]string{"DATABASE_URL": databaseURL, "LOG_LEVEL": "debug", "DRAIN_DELAY": "0s", "LEDGER_SPOOL_DIR": t.TempDir(),
		"OUTBOUND_ALLOW": LoopbackAllow}
	for k, v := range env {
		vars[k] = v
	}
	if _, ok := env["CREDENTIAL_GRANTS"]; !ok {
		vars["CREDENTIAL_GRANTS"] = LoopbackGrants(env)
	}
	getenv := func(name string) string { return vars[name] }
	cfg, err := config.Load(getenv)
	if err != nil {
		t.Fatalf("apptest: config: %v", err)
	}
	logs := &SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, getenv, log, opts...)
	if err != nil {
		cancel()
		t.Fatalf("apptest: %v", err)
	}
	return a, logs, ctx, cancel
}

// LoopbackGrants grants the two provider keys, and every other credential
// variable env sets, to the loopback hosts a test's upstreams listen on (the
// provider keys to their providers too): the grants a test gets unless it
// sets CREDENTIAL_GRANTS itself.
func LoopbackGrants(env map[string]string) string {
	var grants []string
	for _, p := range grant.Presets {
		grants = append(grants, p.Env+": hosts="+strings.Join(p.Hosts, ",")+",127.0.0.1,localhost")
	}
	for name := range env {
		if strings.HasPrefix(name, "TOLLGATE_CREDENTIAL_") {
			grants = append(grants, name+": hosts=127.0.0.1,localhost")
		}
	}
	slices.Sort(grants)
	return strings.Join(grants, "; ")
}

// Grants is LoopbackGrants(env) parsed: for a test that writes routes
// through a store of its own before its replicas start.
func Grants(env map[string]string) grant.Table {
	t, err := grant.Parse(LoopbackGrants(env))
	if err != nil {
		panic(err) // LoopbackGrants writes only grants that parse
	}
	return t
}

// SyncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
