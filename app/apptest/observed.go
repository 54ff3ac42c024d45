package apptest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/app"
)

// Observed is a replica with its admin listener and every span it made.
type Observed struct {
	*Replica
	AdminURL string
	// Spans records every span, ended or not, as an OTLP exporter would get them.
	Spans *tracetest.SpanRecorder

	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error
}

// StartObserved is Start with the admin listener on a free loopback port and
// tracing into an in-memory recorder. env works as in Start; DRAIN_DELAY is 0s
// unless env sets it.
func StartObserved(t testing.TB, databaseURL string, env map[string]string) *Observed {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	a, logs, ctx, cancel := boot(t, databaseURL, env, app.WithTracerProvider(tp))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("apptest: listen: %v", err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("apptest: listen: %v", err)
	}
	o := &Observed{
		Replica:  &Replica{URL: "http://" + ln.Addr().String(), App: a, Logs: logs},
		AdminURL: "http://" + admin.Addr().String(),
		Spans:    spans,
		stop:     cancel,
		done:     make(chan error, 1),
	}
	go func() { o.done <- a.Serve(ctx, ln, admin) }()
	t.Cleanup(func() {
		if err := o.Shutdown(30 * time.Second); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("apptest: serve: %v", err)
		}
		a.Close()
	})
	return o
}

// Shutdown does what SIGTERM does, then waits up to timeout for Serve to
// return and returns its error. Later calls return the same.
func (o *Observed) Shutdown(timeout time.Duration) error {
	o.once.Do(func() {
		o.stop()
		select {
		case o.err = <-o.done:
		case <-time.After(timeout):
			o.err = errors.New("apptest: replica did not shut down in time")
		}
	})
	return o.err
}

// BeginShutdown starts the drain, as SIGTERM does, without waiting.
func (o *Observed) BeginShutdown() { o.stop() }

// Admin GETs path on the admin listener and returns the status and body.
func (o *Observed) Admin(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(o.AdminURL + path)
	if err != nil {
		t.Fatalf("apptest: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TCPProxy forwards a loopback port to a target until stopped: a dependency
// (Postgres) that the test can take away and give back.
type TCPProxy struct {
	target string
	addr   string // where it listens, across restarts
	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// NewTCPProxy starts forwarding to target (host:port); it stops when the test ends.
func NewTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	go p.accept(ln)
	t.Cleanup(p.Stop)
	return p
}

// Addr is where the proxy listens.
func (p *TCPProxy) Addr() string { return p.addr }

// Via rewrites a URL's host to the proxy's address.
func (p *TCPProxy) Via(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Host = p.Addr()
	return u.String()
}

// Stop closes the listener and cuts every connection: the target is gone.
func (p *TCPProxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
}

// Restart listens again on the same address after Stop: the target is back.
func (p *TCPProxy) Restart(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("apptest: listen again on %s: %v", p.addr, err)
	}
	p.ln, p.closed, p.conns = ln, false, map[net.Conn]bool{}
	go p.accept(ln)
}

func (p *TCPProxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *TCPProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

func (p *TCPProxy) pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}
