package faulty

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Refused returns a URL whose port has nothing listening (bind, take the port, close), so
// a dial is refused.
func Refused(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// HangBeforeHeaders accepts, reads the request, and never answers until the test ends or
// the client goes away.
func HangBeforeHeaders(t testing.TB) *Server {
	t.Helper()
	return serve(t, func(_ *Server, _ http.ResponseWriter, r *http.Request) {
		// Reading the body to the end is also what lets net/http notice a client that leaves.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		panic(http.ErrAbortHandler) // returning would send an empty 200
	})
}

// ResetInputTokens is the input_tokens that ResetMidStream's message_start reports, so a
// test can check what a cut stream was billed.
const ResetInputTokens = 25

// ResetMidStream answers 200 text/event-stream, writes events SSE events (a message_start
// carrying usage, then content_block_delta events) and then resets the TCP connection
// instead of ending the stream.
func ResetMidStream(t testing.TB, events int) *Server {
	t.Helper()
	messageStart := fmt.Sprintf("event: message_start\ndata: "+
		`{"type":"message_start","message":{"id":"msg_faulty","type":"message","role":"assistant","model":"claude-faulty",`+
		`"content":[],"stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`+
		"\n\n", ResetInputTokens)
	const textDelta = "event: content_block_delta\ndata: " +
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"faulty "}}` + "\n\n"
	return serve(t, func(s *Server, w http.ResponseWriter, r *http.Request) {
		if startStream(w) != nil {
			return
		}
		for i := range events {
			ev := textDelta
			if i == 0 {
				ev = messageStart
			}
			if s.send(w, []byte(ev)) != nil {
				return
			}
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler) // the nearest net/http has to a reset
		}
		// Linger 0 makes Close send RST rather than FIN: the peer reads an error, not an end.
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	})
}

// Status answers every request with code and a small Anthropic-style JSON error body, e.g.
// for 500 or 503 storms. It sends no Retry-After, so the gateway's own backoff decides.
func Status(t testing.TB, code int) *Server {
	t.Helper()
	return serve(t, func(s *Server, w http.ResponseWriter, _ *http.Request) {
		s.sendJSON(w, code, errorBody(code))
	})
}

// Huge answers 200 application/json with an n-byte body generated as it is written, never
// held in memory at once, with or without a Content-Length (withLength). The body is
// {"pad":"xxx…"}, cut short when n is under 10.
func Huge(t testing.TB, n int64, withLength bool) *Server {
	t.Helper()
	return serve(t, func(s *Server, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if withLength {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		}
		w.WriteHeader(http.StatusOK)
		const head, tail = `{"pad":"`, `"}`
		body := io.LimitReader(io.MultiReader(
			strings.NewReader(head),
			io.LimitReader(filler{}, n-int64(len(head)+len(tail))),
			strings.NewReader(tail),
		), n)
		buf := make([]byte, 32<<10)
		for {
			k, err := body.Read(buf)
			if k > 0 && s.send(w, buf[:k]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	})
}

// xs backs filler; copying from it is far cheaper under -race than setting bytes one by one.
var xs = bytes.Repeat([]byte{'x'}, 4<<10)

// filler reads an endless run of 'x'.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], xs)
	}
	return n, nil
}

// Dribble answers 200 text/event-stream and then writes one byte every interval, flushing
// each, until the test ends or the client goes away. The bytes spell ": dribble\n\n" over
// and over: well-formed SSE comments that never carry an event.
func Dribble(t testing.TB, interval time.Duration) *Server {
	t.Helper()
	const comment = ": dribble\n\n"
	return serve(t, func(s *Server, w http.ResponseWriter, r *http.Request) {
		if startStream(w) != nil {
			return
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				panic(http.ErrAbortHandler) // returning would end the stream cleanly
			case <-tick.C:
			}
			if s.send(w, []byte{comment[i%len(comment)]}) != nil {
				return
			}
		}
	})
}

// Flaky answers the first failures requests with code and an error body like Status's,
// then 200 with {"ok":true,"server":"<name>"}. Every answer carries an X-Faulty-Server
// header with name, so a test can tell which upstream a request reached.
func Flaky(t testing.TB, name string, failures int, code int) *Server {
	t.Helper()
	ok, err := json.Marshal(map[string]any{"ok": true, "server": name})
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	return serve(t, func(s *Server, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Faulty-Server", name)
		if served.Add(1) <= int64(failures) {
			s.sendJSON(w, code, errorBody(code))
			return
		}
		s.sendJSON(w, http.StatusOK, ok)
	})
}

func startStream(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w).Flush()
}

func (s *Server) sendJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = s.send(w, body) // a client that left needs no answer
}

// errorBody is the error Anthropic would send with code.
func errorBody(code int) []byte {
	typ := "invalid_request_error"
	switch {
	case code == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case code == 529:
		typ = "overloaded_error"
	case code >= 500:
		typ = "api_error"
	}
	return fmt.Appendf(nil, `{"type":"error","error":{"type":%q,"message":"faulty upstream: status %d"}}`, typ, code)
}
