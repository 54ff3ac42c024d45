package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestAdmitIsNeverResent cuts the connection after an ADMIT reached Redis and
// before its reply came back, through the client the app builds from its
// configuration: the script must have been sent exactly once (go-redis's own
// retries would send it again on a new connection, and Redis ran the first
// one), the request fails closed, and the admission Redis did run is released
// in the background, so its concurrency slot comes back at once rather than at
// the end of its lease.
func TestAdmitIsNeverResent(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cut := newCuttingProxy(t, srv.Addr())
	cfg := shapeConfig(t, map[string]string{"REDIS_URL": "redis://" + cut.addr() + "/0", "REDIS_TIMEOUT": "2s"})
	lim, closeLim, err := app.NewLimiter(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLim)
	ctx := context.Background()
	req := func(id string) limiter.Request {
		return limiter.Request{Team: "t", Member: "ada", KeyID: "k", RequestID: id, Lease: time.Hour,
			MemberPolicy: limiter.Policy{Concurrency: 1}}
	}
	if d, err := lim.Admit(ctx, req("warm-up")); err != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v, %v", d, err)
	}
	if _, err := lim.Settle(ctx, limiter.Settlement{Team: "t", Member: "ada", RequestID: "warm-up"}); err != nil {
		t.Fatal(err)
	}

	before := cut.scripts.Load()
	cut.armed.Store(true)
	d, err := lim.Admit(ctx, req("cut"))
	if sent := cut.scripts.Load() - before; sent != 1 {
		t.Fatalf("the cut ADMIT was sent %d times, want once", sent)
	}
	if err == nil || d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("cut ADMIT = %+v, %v; want refused as unavailable with an error", d, err)
	}
	if cut.armed.Load() {
		t.Fatal("the proxy never cut a connection")
	}
	// Redis ran the cut ADMIT and holds its slot; the release frees it.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		d, err := lim.Admit(ctx, req("after-"+strconv.Itoa(i)))
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot the cut ADMIT took was not released: %+v, %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cuttingProxy forwards TCP to Redis and counts the scripts sent through it;
// while armed, it closes the client's connection instead of relaying the reply
// to the next script (once): Redis has run it, the client never learns so.
type cuttingProxy struct {
	ln      net.Listener
	to      string
	scripts atomic.Int64
	armed   atomic.Bool
}

func newCuttingProxy(t *testing.T, to string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{ln: ln, to: to}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *cuttingProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttingProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer server.Close()
	var cutNext atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				scripts := bytes.Count(bytes.ToLower(buf[:n]), []byte("\r\nevalsha\r\n")) +
					bytes.Count(bytes.ToLower(buf[:n]), []byte("\r\neval\r\n"))
				p.scripts.Add(int64(scripts))
				if scripts > 0 && p.armed.CompareAndSwap(true, false) {
					cutNext.Store(true)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && cutNext.Load() {
			return // the reply is dropped with the connection
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
