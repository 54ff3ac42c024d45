package proxy

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// GuardFraming makes srv refuse requests whose framing two HTTP parsers could
// read differently (RFC 9112 §6.3, §5.2): Content-Length together with
// Transfer-Encoding in either order, and any obs-folded header line (a folded
// Transfer-Encoding among them). Go's server frames such a request by
// Transfer-Encoding and deletes Content-Length before any handler runs, so a
// front proxy that framed it by Content-Length would see the chunked body's
// tail as a second request (smuggling). The check therefore reads the raw
// request heads as they come off the connection; the request is answered 400
// in the provider's error shape and the connection closed, before any route
// or upstream sees it. It wraps srv.Handler and srv.ConnContext; serve srv on
// the listener it returns.
func GuardFraming(srv *http.Server, ln net.Listener) net.Listener {
	next, connContext := srv.Handler, srv.ConnContext
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(framedConnKey{}).(*framedConn); ok {
			if c.ambiguous.Load() {
				w.Header().Set("Connection", "close")
				WriteError(w, guessDialect(r), errAmbiguousFraming)
				return
			}
			if c.blind.Load() {
				w.Header().Set("Connection", "close")
			}
		}
		next.ServeHTTP(w, r)
	})
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if connContext != nil {
			ctx = connContext(ctx, c)
		}
		if fc, ok := c.(*framedConn); ok {
			ctx = context.WithValue(ctx, framedConnKey{}, fc)
		}
		return ctx
	}
	maxHead := srv.MaxHeaderBytes
	if maxHead <= 0 {
		maxHead = http.DefaultMaxHeaderBytes
	}
	// Go's own bound is MaxHeaderBytes plus 4 KiB of slack plus what its reader
	// had buffered; past this the server has already refused the request.
	return framingListener{Listener: ln, maxHead: maxHead + 16<<10}
}

var errAmbiguousFraming = &Error{Kind: KindInvalidRequest, Message: "ambiguous request framing: send either Content-Length or Transfer-Encoding: chunked, not both, and no folded header lines"}

type framedConnKey struct{}

type framingListener struct {
	net.Listener
	maxHead int
}

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framedConn{Conn: c, f: framer{maxHead: l.maxHead}}, nil
}

// framedConn follows the request heads in the bytes the server reads. A
// request's head has passed through Read before the server hands the request
// to a handler, so the flags are set by then; they only ever turn on, and a
// connection that showed one ambiguous head serves nothing more.
type framedConn struct {
	net.Conn
	mu sync.Mutex // the server's reads may come from its background reader
	f  framer
	// ambiguous: a head was ambiguous, or could not be followed.
	// blind: a chunked body follows, whose end is not tracked, so the
	// connection must close after this response for no later head to go
	// unread (clients send JSON with Content-Length; chunked is rare).
	ambiguous, blind atomic.Bool
}

func (c *framedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		verdict := c.f.feed(p[:n])
		c.mu.Unlock()
		switch verdict {
		case framingAmbiguous:
			c.ambiguous.Store(true)
		case framingBlind:
			c.blind.Store(true)
		}
	}
	return n, err
}

type framingVerdict int

const (
	framingOK framingVerdict = iota
	framingBlind
	framingAmbiguous
)

// framer is a small state machine over a connection's bytes: head lines (as
// Go reads them, LF or CRLF), then a Content-Length body to skip, then the
// next head. It stops at a chunked body or an ambiguous head.
type framer struct {
	maxHead int
	verdict framingVerdict
	body    int64  // bytes of the current body still to skip
	line    []byte // the current line's start, up to lineKeep bytes
	lineLen int    // the current line's full length
	head    headState
}

// headState is what the framer learnt from the head it is reading.
type headState struct {
	len     int
	started bool // the request line was seen
	cl, te  int  // Content-Length and Transfer-Encoding lines
	length  int64
	badCL   bool // a Content-Length it cannot read, or two that differ
	folded  bool
}

// lineKeep is how much of a header line the framer keeps: enough for the
// field name and a Content-Length value.
const lineKeep = 64

// feed follows b and returns the verdict so far.
func (f *framer) feed(b []byte) framingVerdict {
	for len(b) > 0 && f.verdict == framingOK {
		if f.body > 0 {
			skip := min(int64(len(b)), f.body)
			f.body -= skip
			b = b[skip:]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		f.lineLen += len(part)
		f.head.len += len(part) + 1
		if keep := lineKeep - len(f.line); keep > 0 {
			f.line = append(f.line, part[:min(keep, len(part))]...)
		}
		if f.head.len > f.maxHead {
			f.verdict = framingAmbiguous
			break
		}
		if i < 0 {
			break
		}
		b = b[i+1:]
		f.endLine()
		f.line, f.lineLen = f.line[:0], 0
	}
	return f.verdict
}

// endLine takes one complete head line (without its LF).
func (f *framer) endLine() {
	h := &f.head
	line, n := f.line, f.lineLen
	if n > 0 && n <= len(line) && line[n-1] == '\r' {
		line, n = line[:n-1], n-1
	}
	switch {
	case !h.started:
		// Blank lines before a request line are skipped, as Go tolerates some.
		h.started = n > 0
	case n == 0:
		f.endHead()
	case line[0] == ' ' || line[0] == '\t':
		h.folded = true
	default:
		name, value, _ := bytes.Cut(line, []byte(":"))
		switch {
		case asciiEqualFold(name, "content-length"):
			h.cl++
			if n > len(line) { // the value did not fit: no sane length is that long
				h.badCL = true
				return
			}
			v, err := strconv.ParseInt(string(bytes.Trim(value, " \t")), 10, 64)
			if err != nil || v < 0 || (h.cl > 1 && v != h.length) {
				h.badCL = true
			}
			h.length = v
		case asciiEqualFold(name, "transfer-encoding"):
			h.te++
		}
	}
}

// endHead decides how the request that just ended its head is framed.
func (f *framer) endHead() {
	h := f.head
	f.head = headState{}
	switch {
	case h.folded, h.te > 0 && h.cl > 0, h.badCL:
		f.verdict = framingAmbiguous
	case h.te > 0:
		f.verdict = framingBlind
	default:
		f.body = h.length
	}
}

// asciiEqualFold compares a field name with a lower-case one.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
