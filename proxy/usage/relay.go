package usage

import "encoding/json"

// maxHeldBytes bounds the bytes of one event a relay holds back while it cannot
// yet tell whether to drop it. The usage chunk is a few hundred bytes; an event
// past this passes on as it arrives and is no longer one that can be dropped.
const maxHeldBytes = 64 << 10

// relay passes a stream on whole event by event, so that one event can be left
// out: the usage chunk of an OpenAI chat stream whose caller did not ask for it
// (the gateway added stream_options.include_usage to read it). The sseParser
// finds the events; the relay cuts the raw bytes at the same blank lines, so
// every byte that passes is the upstream's, in order.
type relay struct {
	on     bool
	held   []byte // the current event's bytes so far
	out    []byte // whole events to pass on, read from outAt on
	outAt  int
	chunk  []byte // the chunk being fed
	from   int    // bytes of chunk already passed on, dropped or held
	drop   bool   // the current event is the one to leave out
	passed bool   // part of the current event went out already: too late to drop it
	// dropped: the last event was left out; endCR: it ended in a CR at the end
	// of a chunk, so a LF starting the next chunk is the rest of its CRLF.
	dropped, endCR bool
	err            error // the body's, returned once out is empty
}

// DropUsageChunk makes the Tap leave the usage-only chunk (empty choices beside
// a usage object) out of an OpenAI chat or completions stream, for a caller
// who did not ask for it. It reports whether the response is such a stream; it
// must be called before the first Read. Complete events then reach the reader
// as soon as their blank line arrives; an event still arriving waits for it,
// up to maxHeldBytes.
func (t *Tap) DropUsageChunk() bool {
	if t.mode != modeSSE || t.kind != OpenAIChat && t.kind != OpenAICompletions {
		return false
	}
	t.relay.on = true
	t.sse.onBoundary = t.relay.boundary
	return true
}

// boundary takes the current event, which ends at end in the chunk being fed,
// out of the stream or passes it on.
func (r *relay) boundary(end int) {
	r.dropped = r.drop && !r.passed
	if !r.dropped {
		r.out = append(append(r.out, r.held...), r.chunk[r.from:end]...)
	}
	r.held, r.from, r.drop, r.passed = r.held[:0], end, false, false
}

// relayRead is Tap.Read for a relayed stream: it reads until some whole event can be
// passed on or the body ends.
func (t *Tap) relayRead(p []byte) (int, error) {
	r := &t.relay
	for len(r.out) == 0 && r.err == nil {
		n, err := t.body.Read(p)
		t.mu.Lock()
		r.chunk, r.from = p[:n], 0
		if r.endCR && n > 0 && p[0] == '\n' {
			if !r.dropped {
				r.out = append(r.out, '\n')
			}
			r.from = 1
		}
		if !t.done && n > 0 {
			t.sse.feed(r.chunk)
			r.endCR = r.from == n && t.sse.afterCR
		}
		rest := r.chunk[r.from:]
		if t.done || len(r.held)+len(rest) > maxHeldBytes {
			r.out = append(append(r.out, r.held...), rest...)
			r.held, r.passed = r.held[:0], true
		} else {
			r.held = append(r.held, rest...)
		}
		if err != nil {
			t.finish() // may read a last event left without its blank line
			if !r.drop || r.passed {
				r.out = append(r.out, r.held...)
			}
			r.held, r.err = nil, err
		}
		r.chunk = nil
		t.mu.Unlock()
	}
	n := copy(p, r.out[r.outAt:])
	if r.outAt += n; r.outAt == len(r.out) {
		r.out, r.outAt = r.out[:0], 0
		if r.err != nil {
			return n, r.err
		}
	}
	return n, nil
}

// addedUsageChunk reports whether data is the chunk include_usage adds to a
// chat stream: an empty choices array beside a usage object. A compatible
// server that puts usage on a content chunk instead has that chunk passed on.
func addedUsageChunk(data []byte) bool {
	if !hasObjectMember(data, usageKey) {
		return false
	}
	var c struct {
		Choices *[]json.RawMessage `json:"choices"`
		Usage   json.RawMessage    `json:"usage"`
	}
	return json.Unmarshal(data, &c) == nil && c.Choices != nil && len(*c.Choices) == 0 && len(c.Usage) > 0 && c.Usage[0] == '{'
}
