package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/proxy/netguard"
)

// TransportOptions tune the upstream connection pool.
type TransportOptions struct {
	// FirstByteTimeout bounds the wait for the upstream's response headers
	// (default 10m: a non-streamed completion sends its headers only when done;
	// negative: off).
	FirstByteTimeout time.Duration
	// MaxIdleConnsPerHost keeps warm connections to each upstream (default 256).
	MaxIdleConnsPerHost int
	// MaxResponseHeaderBytes bounds an upstream's response headers (default
	// 64 KiB, where Go's is 10 MiB): past it the attempt fails and the caller
	// gets 502 (responseHeaderTooLarge).
	MaxResponseHeaderBytes int64
	// Guard checks every connection's address (default netguard.New with no
	// allow-list: loopback and private upstreams refused).
	Guard *netguard.Guard
}

// NewTransport returns the upstream transport: pooled keep-alive connections, no
// proxy from the environment (it would bypass the dial check), and every dial
// checked by the guard after DNS.
func NewTransport(o TransportOptions) *http.Transport {
	if o.FirstByteTimeout == 0 {
		o.FirstByteTimeout = 10 * time.Minute
	}
	o.FirstByteTimeout = max(o.FirstByteTimeout, 0)
	if o.MaxIdleConnsPerHost == 0 {
		o.MaxIdleConnsPerHost = 256
	}
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = 64 << 10
	}
	if o.Guard == nil {
		o.Guard = netguard.New(netguard.Options{})
	}
	return &http.Transport{
		DialContext:            o.Guard.Dialer().DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4 * o.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    o.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  o.FirstByteTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: o.MaxResponseHeaderBytes,
		// An HTTP/1 connection keeps both buffers for as long as it lives, a
		// stream's whole life included. 2 KiB instead of 4 holds the headers of
		// most requests and answers; a longer request body goes out in a second
		// write either way, and reads of a body at least the buffer's size
		// bypass it (the copy buffer is 4 KiB).
		WriteBufferSize: 2 << 10,
		ReadBufferSize:  2 << 10,
	}
}

// responseHeaderTooLarge reports whether err is net/http's refusal of response
// headers past MaxResponseHeaderBytes (HTTP/1) or past the header list size it
// advertised (HTTP/2). Neither is a typed error, so their texts are matched;
// a test over loopback keeps the HTTP/1 one honest.
func responseHeaderTooLarge(err error) bool {
	s := err.Error()
	return strings.Contains(s, "server response headers exceeded") ||
		strings.Contains(s, "response header list larger than advertised limit")
}

// watchedBody cancels the upstream request when no bytes arrive for the idle
// timeout, so a stalled stream ends instead of holding resources forever while
// a stream that keeps sending may last as long as it likes; it ends a
// response that grows past its size limit; and at Close, before ReverseProxy
// copies them, it scrubs the trailers the upstream sent (scrubHeader).
type watchedBody struct {
	io.ReadCloser
	timeout  time.Duration
	timer    *time.Timer
	once     sync.Once
	limit    int64 // 0: none
	read     int64
	streamed bool
	cancel   context.CancelCauseFunc
	resp     *http.Response // whose Trailer is filled in at the body's end
	secret   string
}

func newWatchedBody(body io.ReadCloser, idle time.Duration, limit int64, streamed bool, cancel context.CancelCauseFunc,
	resp *http.Response, secret string) io.ReadCloser {
	b := &watchedBody{ReadCloser: body, timeout: idle, limit: limit, streamed: streamed, cancel: cancel, resp: resp, secret: secret}
	if idle > 0 {
		b.timer = time.AfterFunc(idle, func() { cancel(errStreamIdle) })
	}
	return b
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.timeout)
	}
	if b.limit > 0 && b.read+int64(n) > b.limit {
		// Hand over what fits; the next Read finds nothing fits and ends it.
		if keep := b.limit - b.read; keep > 0 {
			b.read = b.limit
			return int(keep), nil
		}
		tooLarge := &responseTooLarge{limit: b.limit, streamed: b.streamed}
		b.cancel(tooLarge)
		return 0, tooLarge
	}
	b.read += int64(n)
	return n, err
}

func (b *watchedBody) Close() error {
	b.once.Do(func() {
		if b.timer != nil {
			b.timer.Stop()
		}
	})
	err := b.ReadCloser.Close()
	scrubHeader(b.resp.Trailer, b.secret)
	return err
}

// copyBuffers hands ReverseProxy 2 KiB copy buffers instead of a fresh 32 KiB one
// per response: at 5,000 open streams the default buffers were half the heap
// (loadtest memory scenario), and SSE events are far smaller than 2 KiB. It is
// the size of the Transport's read buffer, which a read this large bypasses.
type copyBuffers struct{ pool sync.Pool }

func newCopyBuffers() *copyBuffers {
	return &copyBuffers{pool: sync.Pool{New: func() any { b := make([]byte, 2<<10); return &b }}}
}

func (c *copyBuffers) Get() []byte  { return *c.pool.Get().(*[]byte) }
func (c *copyBuffers) Put(b []byte) { c.pool.Put(&b) }
