package app_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// countingRoute adds a route /count to f's team whose upstream counts the
// requests it receives, and waits until the gateway serves it.
func countingRoute(t *testing.T, f *fixture) *atomic.Int64 {
	t.Helper()
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(upstream.Close)
	_, err := f.st.AddRoute(context.Background(), store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Prefix: "/count",
		UpstreamURL: upstream.URL, Dialect: "generic", CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"})
	must(t, err)
	eventually(t, 10*time.Second, "route /count loaded", func() bool {
		return do(t, anthropicRequest(t, f.gw.URL+"/count", f.key, messagesBody)).status == http.StatusOK
	})
	return &hits
}

type rawResponse struct {
	status int
	header http.Header
	body   string
}

// rawExchange writes payload on a new connection to the gateway and reads
// responses until the gateway closes it (closed) or nothing more comes.
func rawExchange(t *testing.T, gwURL string, payload ...string) (got []rawResponse, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gwURL, "http://"))
	must(t, err)
	defer conn.Close()
	br := bufio.NewReader(conn)
	read := func() bool {
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return false
			}
			closed = errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
				strings.Contains(err.Error(), "connection reset")
			if !closed {
				t.Fatalf("reading a response: %v", err)
			}
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, rawResponse{status: resp.StatusCode, header: resp.Header, body: string(body)})
		return true
	}
	// Each part is written once the gateway answered the one before, so an
	// earlier request is served before the gateway can read a later one.
	for i, p := range payload {
		if _, err := io.WriteString(conn, p); err != nil {
			return got, true
		}
		if i < len(payload)-1 && !read() {
			return got, closed
		}
	}
	for read() {
	}
	return got, closed
}

// TestAmbiguousFramingIsRefused sends request-smuggling payloads over raw
// sockets: each is answered 400 in the provider's shape, the connection is
// closed, and the upstream never sees a request (neither the framed one nor
// the one hidden after its body).
func TestAmbiguousFramingIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hits := countingRoute(t, f)
	head := "POST /count/v1/x HTTP/1.1\r\nHost: gw\r\nx-api-key: " + f.key + "\r\nanthropic-version: 2023-06-01\r\n"
	// What a front proxy framing by Content-Length would take for the body's tail.
	smuggled := head + "Content-Length: 2\r\n\r\n{}"
	cases := map[string]string{
		"CL then TE":                 head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
		"TE then CL":                 head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled,
		"obs-folded TE":              head + "Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled,
		"folded TE value":            head + "X-Note: a\r\n\tTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}" + smuggled,
		"lower-case names, LF lines": strings.ReplaceAll(head, "\r\n", "\n") + "transfer-encoding: chunked\ncontent-length: 5\n\n0\r\n\r\n" + smuggled,
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			before := hits.Load()
			got, closed := rawExchange(t, f.gw.URL, payload)
			if len(got) != 1 || got[0].status != http.StatusBadRequest {
				t.Fatalf("want exactly one 400, got %+v", got)
			}
			if _, msg := errorShape(t, "anthropic", got[0].body); !strings.Contains(msg, "framing") {
				t.Errorf("message %q does not say what was wrong", msg)
			}
			if !closed {
				t.Errorf("the connection stayed open")
			}
			if n := hits.Load() - before; n != 0 {
				t.Errorf("the upstream saw %d requests", n)
			}
		})
	}

	// Refused by Go's own parser already; kept refused.
	for name, payload := range map[string]string{
		"two different CL":         head + "Content-Length: 2\r\nContent-Length: 7\r\n\r\n{}" + smuggled,
		"bare-LF chunk size":       head + "Transfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\r\n\r\n" + smuggled,
		"bare-LF after chunk data": head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\n0\r\n\r\n" + smuggled,
	} {
		t.Run(name, func(t *testing.T) {
			before := hits.Load()
			got, closed := rawExchange(t, f.gw.URL, payload)
			if len(got) != 1 || got[0].status != http.StatusBadRequest || !closed {
				t.Fatalf("want one 400 and the connection closed, got %+v (closed %v)", got, closed)
			}
			if n := hits.Load() - before; n != 0 {
				t.Errorf("the upstream saw %d requests", n)
			}
		})
	}

	t.Run("an ambiguous request after a good one on the same connection", func(t *testing.T) {
		before := hits.Load()
		got, closed := rawExchange(t, f.gw.URL, smuggled, cases["TE then CL"])
		if len(got) != 2 || got[0].status != http.StatusOK || got[1].status != http.StatusBadRequest || !closed {
			t.Fatalf("want 200 then 400 and the connection closed, got %+v (closed %v)", got, closed)
		}
		if n := hits.Load() - before; n != 1 {
			t.Errorf("the upstream saw %d requests, want the good one only", n)
		}
	})

	t.Run("keep-alive across bodies still works", func(t *testing.T) {
		before := hits.Load()
		get := "GET /count/v1/models HTTP/1.1\r\nHost: gw\r\nx-api-key: " + f.key + "\r\n\r\n"
		last := head + "Connection: close\r\nContent-Length: 2\r\n\r\n{}"
		// The body holds a line that would be ambiguous were it a head.
		oddBody := "Transfer-Encoding: chunked\r\n\r\n12345"
		odd := head + "Content-Length: " + strconv.Itoa(len(oddBody)) + "\r\n\r\n" + oddBody
		got, closed := rawExchange(t, f.gw.URL, smuggled, get, odd, smuggled+get+last)
		if len(got) != 6 || !closed {
			t.Fatalf("want 6 answers and the close asked for, got %d (closed %v): %+v", len(got), closed, got)
		}
		for i, r := range got {
			if r.status != http.StatusOK {
				t.Errorf("request %d: %d %s", i, r.status, r.body)
			}
		}
		if n := hits.Load() - before; n != 6 {
			t.Errorf("the upstream saw %d requests, want 6", n)
		}
	})

	t.Run("a chunked request is served and ends its connection", func(t *testing.T) {
		before := hits.Load()
		got, closed := rawExchange(t, f.gw.URL, head+"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"+smuggled)
		if len(got) != 1 || got[0].status != http.StatusOK || !closed {
			t.Fatalf("want one 200 and the connection closed, got %+v (closed %v)", got, closed)
		}
		if n := hits.Load() - before; n != 1 {
			t.Errorf("the upstream saw %d requests, want 1", n)
		}
	})
}
