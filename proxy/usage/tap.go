package usage

import (
	"io"
	"mime"
	"sync"
)

// Tap is an io.ReadCloser over an upstream response body that reads the provider's
// usage out of the bytes as they pass. Unless DropUsageChunk was called, Read returns
// exactly what the body's Read returned, after a parse that costs time linear in
// those bytes and never waits for more, so each event reaches the client as soon as
// the upstream sent it. Result and StreamError may be called from any goroutine, also
// while another one reads.
type Tap struct {
	body io.ReadCloser
	kind Kind

	// mu guards what follows. It is never held across the body's Read, so a Close from
	// another goroutine is not stuck behind a stalled upstream.
	mu         sync.Mutex
	mode       mode
	done       bool
	sse        sseParser
	json       bounded
	decode     func([]byte) (Usage, bool) // a usage object (found in the tail of a long body)
	decodeBody func([]byte) (Usage, bool) // a whole JSON body's usage, in one decode
	res        result
	relay      relay // when on, what Read returns is the stream less one event
}

type mode int

const (
	modeOff  mode = iota // nothing to read: the bytes only pass through
	modeSSE              // text/event-stream: events read as they pass
	modeJSON             // a JSON body, kept up to maxBodyBytes and read at its end
)

// NewTap wraps body, the upstream response of the given kind. A text/event-stream
// content type is read as server-sent events, anything else as one JSON body. The Tap
// reads the bytes as sent: a compressed body (Content-Encoding) shows no usage, so a
// metered request should ask its upstream for the identity encoding.
func NewTap(kind Kind, contentType string, body io.ReadCloser) *Tap {
	t := &Tap{body: body, kind: kind}
	if media, _, _ := mime.ParseMediaType(contentType); media == "text/event-stream" {
		if keep, onEvent := eventFuncFor(kind); onEvent != nil {
			t.mode = modeSSE
			t.sse = newSSEParser(keep, func(name, data []byte, truncated bool) {
				onEvent(&t.res, name, data, truncated)
				t.relay.drop = t.relay.on && !truncated && addedUsageChunk(data)
			})
		}
	} else if kind != Unknown {
		t.mode = modeJSON
		t.json = bounded{limit: maxBodyBytes}
		t.decode, t.decodeBody = openAIUsage, openAIBody
		if kind == AnthropicMessages {
			t.decode, t.decodeBody = anthropicUsage, anthropicBody
		}
	}
	return t
}

// eventFuncFor returns the events a kind's stream has usage in (nil: any event may)
// and the function that reads them.
func eventFuncFor(kind Kind) (keep func(name []byte) bool, onEvent eventFunc) {
	switch kind {
	case AnthropicMessages:
		return anthropicKeeps, anthropicEvent
	case OpenAIChat, OpenAICompletions:
		return nil, chatEvent // chunks have no event names
	case OpenAIResponses:
		return responsesKeeps, responsesEvent
	}
	return nil, nil // embeddings never stream
}

// Read reads from the upstream body and notes what passed. An error from the body,
// io.EOF included, ends the parse.
func (t *Tap) Read(p []byte) (int, error) {
	if t.relay.on {
		return t.relayRead(p)
	}
	n, err := t.body.Read(p)
	if t.mode == modeOff {
		return n, err
	}
	t.mu.Lock()
	if !t.done {
		switch t.mode {
		case modeSSE:
			t.sse.feed(p[:n])
		case modeJSON:
			t.json.write(p[:n])
		}
		if err != nil {
			t.finish()
		}
	}
	t.mu.Unlock()
	return n, err
}

// Close closes the upstream body and ends the parse with what was read.
func (t *Tap) Close() error {
	err := t.body.Close()
	if t.mode != modeOff {
		t.mu.Lock()
		t.finish()
		t.mu.Unlock()
	}
	return err
}

// finish reads the last event or the JSON body, then lets go of the buffers: the Tap
// may live on until the request is settled.
func (t *Tap) finish() {
	if t.done {
		return
	}
	t.done = true
	switch t.mode {
	case modeSSE:
		t.sse.end()
		t.sse = sseParser{}
	case modeJSON:
		// Every provider puts usage at the top level of a response body, after the
		// content; past maxBodyBytes it is looked for in the tail kept, and if it is
		// not there no usage is seen.
		var u Usage
		var ok bool
		if t.json.over {
			u, ok = t.decode(usageInTail(t.json.buf, 1))
		} else {
			u, ok = t.decodeBody(t.json.buf)
		}
		if ok {
			t.res.usage, t.res.seen, t.res.final = u, true, true
		}
		t.json = bounded{}
	}
}

// Result returns the usage seen so far. seen reports whether the provider reported any
// usage; final whether that was its final count: Anthropic's message_delta after
// message_start, OpenAI chat's usage chunk, a Responses response.completed, .incomplete
// or .failed with usage, or a JSON body with a usage object. A partial count (Anthropic's
// message_start alone, in a stream cut short) comes with final false.
func (t *Tap) Result() (u Usage, seen bool, final bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.res.usage, t.res.seen, t.res.final
}

// StreamError returns the name (code or type) of an error the provider sent in the
// stream, such as Anthropic's "overloaded_error", or "" if it sent none.
func (t *Tap) StreamError() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.res.streamErr
}
