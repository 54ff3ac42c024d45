package usage

import (
	"reflect"
	"strings"
	"testing"
)

type sseEvent struct {
	Name, Data string
	Truncated  bool
}

// parseSSE feeds stream to a parser in pieces of at most size bytes.
func parseSSE(stream string, size int) []sseEvent {
	var got []sseEvent
	p := newSSEParser(nil, func(name, data []byte, truncated bool) {
		got = append(got, sseEvent{string(name), string(data), truncated})
	})
	for len(stream) > 0 {
		n := min(size, len(stream))
		p.feed([]byte(stream[:n]))
		stream = stream[n:]
	}
	p.end()
	return got
}

func TestSSEParser(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, stream string
		want         []sseEvent
	}{
		{"NamedEvent", "event: a\ndata: x\n\n", []sseEvent{{"a", "x", false}}},
		{"UnnamedEvent", "data: x\n\n", []sseEvent{{"", "x", false}}},
		{"MultiLineData", "data: a\ndata: b\n\n", []sseEvent{{"", "a\nb", false}}},
		{"EmptyData", "data\n\ndata:\n\n", []sseEvent{{"", "", false}, {"", "", false}}},
		{"NoDataNoEvent", "event: a\n\ndata: x\n\n", []sseEvent{{"", "x", false}}},
		{"Comment", ": hi\ndata: x\n:\n\n", []sseEvent{{"", "x", false}}},
		{"OnlyOneSpaceDropped", "data:  x\n\n", []sseEvent{{"", " x", false}}},
		{"CRLFSplitStaysOneEnding", "data: x\r\ndata: y\r\n\r\n", []sseEvent{{"", "x\ny", false}}},
		{"CROnly", "event: a\rdata: x\r\rdata: y\r\r", []sseEvent{{"a", "x", false}, {"", "y", false}}},
		{"CRThenCRLF", "data: x\r\r\n", []sseEvent{{"", "x", false}}},
		{"LastEventWithoutBlankLine", "data: x\n\ndata: y", []sseEvent{{"", "x", false}, {"", "y", false}}},
		{"LastLineEndedNoBlankLine", "data: y\n", []sseEvent{{"", "y", false}}},
		{"LaterEventFieldWins", "event: a\nevent: b\ndata: x\n\n", []sseEvent{{"b", "x", false}}},
		{"EventWithoutColonIsEmpty", "event: a\nevent\ndata: x\n\n", []sseEvent{{"", "x", false}}},
		{"UnknownFields", "foo: bar\nid: 3\nretry: 10\ndata: x\n\n", []sseEvent{{"", "x", false}}},
		{"FieldNamesExact", "dataX: y\nDATA: y\ndat: y\n\n", nil},
		{"LongEventNameIgnored", "event: " + strings.Repeat("a", maxEventNameBytes+1) + "\ndata: x\n\ndata: y\n\n", []sseEvent{{"", "y", false}}},
		{"BOMStripped", "\xEF\xBB\xBFdata: x\n\n", []sseEvent{{"", "x", false}}},
		{"PartialBOMIsContent", "\xEF\xBBdata: x\n\ndata: y\n\n", []sseEvent{{"", "y", false}}},
		{"BOMOnlyAtStart", "data: x\n\n\xEF\xBB\xBFdata: y\n\n", []sseEvent{{"", "x", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, size := range []int{1, 2, 3, 5, len(c.stream)} {
				if got := parseSSE(c.stream, size); !reflect.DeepEqual(got, c.want) {
					t.Errorf("pieces of %d: got %+v, want %+v", size, got, c.want)
				}
			}
		})
	}
}

func TestSSEParserOversizedEvent(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("0123456789", maxEventBytes/10+1000)
	for _, size := range []int{4096, 1 << 20} {
		got := parseSSE("event: big\ndata: "+line+"\ndata: end\n\ndata: small\n\n", size)
		if len(got) != 2 || !got[0].Truncated || got[1] != (sseEvent{"", "small", false}) {
			t.Fatalf("pieces of %d: got %d events", size, len(got))
		}
		want := (line + "\nend")[len(line)+4-tailBytes:]
		if tail := got[0].Data; !strings.HasSuffix(tail, want) || len(tail) > 2*tailBytes {
			t.Errorf("pieces of %d: tail of %d bytes does not end the event", size, len(tail))
		}
	}
}

// TestSSEParserKeep: the data of events not kept is never copied, and an event whose
// data was skipped is not dispatched under a later name.
func TestSSEParserKeep(t *testing.T) {
	t.Parallel()
	stream := "event: skip\ndata: " + strings.Repeat("x", 3<<20) + "\n\n" +
		"event: keep\ndata: a\n\n" +
		"data: unnamed\n\n" +
		"event: skip\ndata: b\nevent: keep\ndata: c\n\n" +
		"data: d\nevent: keep\n\n"
	for _, size := range []int{7, 1 << 10, len(stream)} {
		var got []string
		p := newSSEParser(func(name []byte) bool { return string(name) == "keep" }, func(name, data []byte, truncated bool) {
			got = append(got, string(name)+":"+string(data))
		})
		for s := stream; len(s) > 0; {
			n := min(size, len(s))
			p.feed([]byte(s[:n]))
			s = s[n:]
		}
		p.end()
		if want := []string{"keep:a"}; !reflect.DeepEqual(got, want) || cap(p.data.buf) > 1024 {
			t.Errorf("pieces of %d: got %q with a %d-byte buffer, want %q", size, got, cap(p.data.buf), want)
		}
	}
}
