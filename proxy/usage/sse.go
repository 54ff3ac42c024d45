package usage

import "bytes"

// maxEventNameBytes bounds the event type kept; a longer type names no event a
// provider sends, so its event is ignored.
const maxEventNameBytes = 64

// sseParser splits a text/event-stream into events by the WHATWG rules: LF, CR and CRLF
// line endings (a CRLF split across two chunks is one ending), comments, the event and
// data fields (data lines joined with LF), dispatch on a blank line. It works on the
// chunks as they come, copying only field values it keeps, so a line never has to be
// whole in memory.
//
// keep, when set, names the events worth the data: the data of any other event is not
// copied at all, which is most of a stream. Providers send event: before data:; an
// event renamed by an event: line after some of its data was skipped is dropped, which
// can only lose usage (the hold is kept), never invent it.
type sseParser struct {
	onEvent func(name, data []byte, truncated bool)
	keep    func(name []byte) bool

	bom     int  // leading bytes matched against the UTF-8 BOM; 3 once decided
	afterCR bool // the last chunk ended in CR: a LF first in the next ends no new line

	inLine  bool // the current line has bytes
	state   lineState
	name    [5]byte // the field name, long enough for "event"
	nameLen int     // may pass len(name): then the field is none we know
	field   field

	event     []byte
	eventLong bool
	data      bounded
	hasData   bool // a data field was seen, even an empty one
	skipped   bool // data was left out because the event was not one to keep

	// onBoundary, when set, learns of each blank line, where an event (or a run
	// of comments) ends, and where in the chunk being fed its line ending ends.
	onBoundary func(end int)
	skip       int // bytes of the chunk being fed taken as the BOM
	lineEnd    int // in the chunk being fed, just past the line ending being handled
}

type lineState int

const (
	inName     lineState = iota
	afterColon           // one space after the colon is not part of the value
	inValue
)

type field int

const (
	fieldOther field = iota // comments, id, retry and unknown fields: ignored
	fieldData
	fieldEvent
)

var utf8BOM = []byte("\xEF\xBB\xBF")

func newSSEParser(keep func(name []byte) bool, onEvent func(name, data []byte, truncated bool)) sseParser {
	return sseParser{onEvent: onEvent, keep: keep, data: bounded{limit: maxEventBytes}}
}

func (p *sseParser) feed(s []byte) {
	whole := len(s)
	for p.bom < len(utf8BOM) && len(s) > 0 {
		if s[0] != utf8BOM[p.bom] {
			matched := p.bom
			p.bom = len(utf8BOM)
			p.lines(utf8BOM[:matched]) // not a BOM after all: those bytes are content
			break
		}
		p.bom++
		s = s[1:]
	}
	p.skip = whole - len(s)
	p.lines(s)
}

// end dispatches an event left without its blank line, so a stream that ends without a
// trailing newline still has its last event counted (the WHATWG rules would drop it).
// A stream cut inside an event leaves its JSON object unclosed, and an unclosed object
// does not parse, so a cut event never passes for a whole one.
func (p *sseParser) end() {
	if p.inLine {
		p.endLine()
	}
	p.dispatch()
}

func (p *sseParser) lines(s []byte) {
	start := 0
	if p.afterCR && len(s) > 0 {
		p.afterCR = false
		if s[0] == '\n' {
			start = 1
		}
	}
	// Each LF and CR is searched for once, not once per line, so the cost is linear
	// whatever mix of endings the stream uses.
	lf, cr := -1, -1
	for start < len(s) {
		if lf < start {
			lf = next(s, start, '\n')
		}
		if cr < start {
			cr = next(s, start, '\r')
		}
		end := min(lf, cr)
		p.part(s[start:end])
		if end == len(s) {
			return
		}
		stop := end + 1
		if s[end] == '\r' && stop < len(s) && s[stop] == '\n' {
			stop++
		}
		p.lineEnd = p.skip + stop
		p.endLine()
		if s[end] == '\r' && end+1 == len(s) {
			p.afterCR = true
			return
		}
		start = stop
	}
}

// next returns the index of the first c in s at or after from, or len(s).
func next(s []byte, from int, c byte) int {
	if i := bytes.IndexByte(s[from:], c); i >= 0 {
		return from + i
	}
	return len(s)
}

// part takes a piece of the current line, which may continue in the next chunk.
func (p *sseParser) part(b []byte) {
	if len(b) == 0 {
		return
	}
	p.inLine = true
	if p.state == inName {
		i := bytes.IndexByte(b, ':')
		if i < 0 {
			p.addName(b)
			return
		}
		p.addName(b[:i])
		p.startValue()
		if b = b[i+1:]; len(b) == 0 {
			return
		}
	}
	if p.state == afterColon {
		p.state = inValue
		if b[0] == ' ' {
			if b = b[1:]; len(b) == 0 {
				return
			}
		}
	}
	switch p.field {
	case fieldData:
		p.data.write(b)
	case fieldEvent:
		if len(p.event)+len(b) > maxEventNameBytes {
			p.eventLong = true
		} else {
			p.event = append(p.event, b...)
		}
	}
}

func (p *sseParser) addName(b []byte) {
	if p.nameLen < len(p.name) {
		copy(p.name[p.nameLen:], b)
	}
	p.nameLen += len(b)
}

func (p *sseParser) startValue() {
	p.state = afterColon
	if p.nameLen > len(p.name) {
		return
	}
	switch string(p.name[:p.nameLen]) {
	case "data":
		if p.keep == nil || p.keep(p.event) {
			p.field = fieldData
		} else {
			p.skipped = true
		}
	case "event":
		p.field = fieldEvent
		p.event, p.eventLong = p.event[:0], false
	}
}

var lineFeed = []byte{'\n'}

func (p *sseParser) endLine() {
	if !p.inLine {
		p.dispatch()
		if p.onBoundary != nil {
			p.onBoundary(p.lineEnd)
		}
		return
	}
	if p.state == inName {
		p.startValue() // a line without a colon is a field with an empty value
	}
	if p.field == fieldData {
		p.data.write(lineFeed)
		p.hasData = true
	}
	p.inLine, p.state, p.nameLen, p.field = false, inName, 0, fieldOther
}

func (p *sseParser) dispatch() {
	if p.hasData && !p.eventLong && !p.skipped {
		data := p.data.buf
		if n := len(data); n > 0 && data[n-1] == '\n' {
			data = data[:n-1]
		}
		p.onEvent(p.event, data, p.data.over)
	}
	p.data.reset()
	p.event, p.eventLong, p.hasData, p.skipped = p.event[:0], false, false, false
}
