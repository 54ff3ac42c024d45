package usage

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Caps on what a Tap keeps, so memory stays flat whatever the upstream sends.
const (
	// maxEventBytes bounds the data kept of one SSE event. Usage events are a few
	// hundred bytes; the events that are bigger carry content.
	maxEventBytes = 1 << 20
	// maxBodyBytes bounds the JSON body kept for parsing at its end.
	maxBodyBytes = 8 << 20
	// tailBytes of a payload over its cap are kept and searched for usage: every
	// provider puts usage after the content, near the end of the object.
	tailBytes = 64 << 10
	// tailCandidates bounds the "usage" keys tried in a tail, each costing a pass
	// over it, so a tail full of such keys cannot make the search quadratic.
	tailCandidates = 4
)

// bounded keeps a payload up to limit bytes; past the limit it keeps only the last
// tailBytes or more (at most 2×tailBytes), and over says so.
type bounded struct {
	buf   []byte
	limit int
	over  bool
}

func (b *bounded) write(p []byte) {
	if !b.over && len(b.buf)+len(p) <= b.limit {
		b.append(p)
		return
	}
	b.over = true
	if len(p) >= tailBytes {
		b.buf = b.buf[:0]
		b.append(p[len(p)-tailBytes:])
		return
	}
	if len(b.buf)+len(p) > 2*tailBytes {
		keep := tailBytes - len(p)
		b.buf = b.buf[:copy(b.buf, b.buf[len(b.buf)-keep:])]
	}
	b.append(p)
}

// append grows buf itself rather than through the built-in append, whose headroom
// could take the capacity past limit.
func (b *bounded) append(p []byte) {
	if need := len(b.buf) + len(p); need > cap(b.buf) {
		buf := make([]byte, len(b.buf), min(max(need, 2*cap(b.buf), 512), b.limit))
		copy(buf, b.buf)
		b.buf = buf
	}
	b.buf = append(b.buf, p...)
}

func (b *bounded) reset() {
	b.buf, b.over = b.buf[:0], false
}

// usageInTail finds the usage object in the tail of a payload too big to keep whole,
// or returns nil. depth is how many objects enclose the usage member: 1 for a response
// body, 2 for a Responses event's response. The usage member must be a real key (its
// quote not escaped), its object whole inside the tail, and the rest of the tail must
// close exactly depth objects and end, which rules out a "usage" nested in content.
// Only the last tailBytes are looked at, so the answer does not depend on how the
// payload was split into reads.
func usageInTail(tail []byte, depth int) []byte {
	if len(tail) > tailBytes {
		tail = tail[len(tail)-tailBytes:]
	}
	enclosing := strings.Repeat(`{"":`, depth-1) + `{"usage":`
	end := len(tail)
	for range tailCandidates {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return nil
		}
		end = i
		if !unescapedQuote(tail, i) {
			continue
		}
		j := skipSpace(tail, i+len(usageKey))
		if j == len(tail) || tail[j] != ':' {
			continue
		}
		j = skipSpace(tail, j+1)
		if j == len(tail) || tail[j] != '{' {
			continue
		}
		if !json.Valid(append([]byte(enclosing), tail[j:]...)) {
			continue
		}
		var raw json.RawMessage
		if json.NewDecoder(bytes.NewReader(tail[j:])).Decode(&raw) == nil {
			return raw
		}
	}
	return nil
}

// unescapedQuote reports whether the quote at i ends or starts a string rather than
// sitting escaped inside one: an even run of backslashes before it. A run reaching the
// start of the tail could be either, so it counts as escaped.
func unescapedQuote(b []byte, i int) bool {
	n := 0
	for i-n-1 >= 0 && b[i-n-1] == '\\' {
		n++
	}
	return i-n > 0 && n%2 == 0
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
