package console

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// maxStreams bounds the event streams one replica serves at once: each costs a
// Redis read and a render every second.
const maxStreams = 256

// streamEndEvent tells the browser that the stream ends by design, after
// StreamLifetime, rather than by failure.
const streamEndEvent = "end"

// signedOutEvent tells the browser that the session behind the stream has
// ended; its data is the sign-in page.
const signedOutEvent = "signedout"

// streamWriteTimeout bounds one event's write, so a client that stops reading
// cannot hold the stream's goroutine.
const streamWriteTimeout = 10 * time.Second

// signedOut answers an EventSource whose session has ended (signed out, cut
// off, expired) with one event naming the sign-in page, so console.js takes
// the page there. A 401 would read as a network error: the EventSource would
// retry forever, the page would say "reconnecting" to someone signed out, and
// the browser would log every attempt.
func signedOut(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "event: "+signedOutEvent+"\ndata: "+Prefix+"/signin\n\n")
}

// stream answers with Server-Sent Events: the component next renders, as event,
// now and then every StreamInterval. It stops when the client leaves, when the
// console shuts down (CloseStreams), or after StreamLifetime: the browser's
// EventSource then reconnects through the session check, so a signed-out or
// demoted owner stops receiving within that time.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, event string, next func(context.Context) (templ.Component, error)) {
	if c.streams.Add(1) > maxStreams {
		c.streams.Add(-1)
		w.Header().Set("Retry-After", "10")
		c.failWith(w, r, http.StatusServiceUnavailable, "Busy", "Too many live views are open; try again shortly.")
		return
	}
	defer c.streams.Add(-1)
	ctx := r.Context()
	first, err := renderEvent(ctx, event, next)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// retry: reconnect 1s after the stream ends.
	if !send(append([]byte("retry: 1000\n\n"), first...)) {
		return
	}
	tick := time.NewTicker(c.streamInterval)
	defer tick.Stop()
	end := time.NewTimer(c.streamLifetime)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.closing:
			return
		case <-end.C:
			// Said before closing, so console.js closes the EventSource and opens
			// a new one itself: a stream that merely ends reads as an error.
			send([]byte("event: " + streamEndEvent + "\ndata:\n\n"))
			return
		case <-tick.C:
			b, err := renderEvent(ctx, event, next)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("console: event stream", "event", event, "err", err)
				}
				return
			}
			if !send(b) {
				return
			}
		}
	}
}

// staleAfter is how long a page waits for the next event, in milliseconds,
// before it says its figures are not live: three missed pushes and a second
// to spare, so a stream's end and the browser's reconnect (a second) pass
// quietly, while a gateway that is down shows within a few seconds.
func (c *Console) staleAfter() string {
	return strconv.FormatInt((3*c.streamInterval + time.Second).Milliseconds(), 10)
}

// renderEvent is one Server-Sent Event carrying the HTML next renders, one
// data line per line of it.
func renderEvent(ctx context.Context, event string, next func(context.Context) (templ.Component, error)) ([]byte, error) {
	comp, err := next(ctx)
	if err != nil {
		return nil, err
	}
	var html bytes.Buffer
	if err := comp.Render(ctx, &html); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for line := range strings.SplitSeq(strings.ReplaceAll(html.String(), "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.Bytes(), nil
}

// CloseStreams ends every open event stream, so that a graceful shutdown does
// not wait on them; register it with http.Server.RegisterOnShutdown.
func (c *Console) CloseStreams() { c.closeOnce.Do(func() { close(c.closing) }) }
