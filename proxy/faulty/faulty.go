// Package faulty starts misbehaving upstreams on 127.0.0.1 for fault-injection tests of
// the gateway: servers that hang, reset, fail, flood or dribble, and a client that sends
// a request one byte at a time. Each server counts what reached it, so a test can assert
// that a POST hit the upstream exactly once, and closes with the test, taking its
// connections and handlers with it.
package faulty

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a misbehaving upstream. URL is "http://127.0.0.1:port".
type Server struct {
	URL string

	srv      *httptest.Server
	stop     context.CancelFunc // cancels every request context, ending hangs and streams
	handlers sync.WaitGroup     // httptest stops waiting for a handler once it hijacks
	requests atomic.Int64
	written  atomic.Int64
	mu       sync.Mutex
	byMethod map[string]int64
}

// handler is a server's behaviour; s is passed so it can count what it writes.
type handler func(s *Server, w http.ResponseWriter, r *http.Request)

// serve starts h on 127.0.0.1:0 and closes it when the test ends.
func serve(t testing.TB, h handler) *Server {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{stop: stop, byMethod: map[string]int64{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		s.count(r.Method)
		// A client that stops reading would block a write, and so Close, forever; a past
		// write deadline fails it once the server closes or the client leaves.
		rc := http.NewResponseController(w)
		defer context.AfterFunc(r.Context(), func() { _ = rc.SetWriteDeadline(time.Unix(1, 0)) })()
		h(s, w, r)
	}))
	s.srv.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

func (s *Server) count(method string) {
	s.mu.Lock()
	s.byMethod[method]++
	s.mu.Unlock()
	s.requests.Add(1)
}

// Requests returns how many requests the server has received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// RequestsFor returns how many requests with method the server has received.
func (s *Server) RequestsFor(method string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byMethod[method]
}

// BytesWritten returns how many response body bytes the server has written and flushed
// to its connections without error. It is exact once the client has read them or the
// server is closed; meanwhile it may include one write still in progress.
func (s *Server) BytesWritten() int64 { return s.written.Load() }

// Close ends every hanging or streaming response, closes the listener and every
// connection, and waits for the handlers to return. The test's cleanup calls it too.
func (s *Server) Close() {
	s.stop()
	s.srv.Close()
	// After srv.Close no handler can start, so Wait does not race a new Add.
	s.handlers.Wait()
}

// send writes b and flushes it. b is counted just before the write, as the mock
// provider commits its record, so a client that has read b finds it counted; a failed
// write takes it back.
func (s *Server) send(w http.ResponseWriter, b []byte) error {
	s.written.Add(int64(len(b)))
	_, err := w.Write(b)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil {
		s.written.Add(-int64(len(b)))
	}
	return err
}
