package usage

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// anthropicStream builds a realistic Anthropic stream of n text deltas between the
// usage events.
func anthropicStream(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":8192,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

`)
	for i := range n {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token %d of a reply\"}}\n\n", i)
	}
	fmt.Fprintf(&b, `event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}

event: message_stop
data: {"type":"message_stop"}

`, n)
	return b.Bytes()
}

// chatStream builds a realistic OpenAI chat stream with include_usage: n content chunks,
// each with "usage":null, then the usage chunk and [DONE].
func chatStream(n int) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_b705f0c291",`
	for i := range n {
		fmt.Fprintf(&b, "%s\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token %d of a reply\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", head, i)
	}
	fmt.Fprintf(&b, "%s\"choices\":[],\"usage\":{\"prompt_tokens\":1117,\"completion_tokens\":%d,\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":1024,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\ndata: [DONE]\n\n", head, n, 1117+n)
	return b.Bytes()
}

// eventReader returns one event per Read, as a body does when the upstream flushes
// each event.
type eventReader struct {
	stream []byte
	off    int
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.off == len(r.stream) {
		return 0, io.EOF
	}
	end := len(r.stream)
	if i := bytes.Index(r.stream[r.off:], []byte("\n\n")); i >= 0 {
		end = r.off + i + 2
	}
	n := copy(p, r.stream[r.off:end])
	r.off += n
	return n, nil
}

// BenchmarkTapSSE relays a 200-event Anthropic stream (and, for the chat path, a
// 200-chunk OpenAI one) into a writer through a plain io.Copy and through a Tap, with
// one event per Read (an upstream flushing each event) and with 32 KiB reads.
func BenchmarkTapSSE(b *testing.B) {
	streams := []struct {
		name   string
		kind   Kind
		stream []byte
	}{
		{"Anthropic", AnthropicMessages, anthropicStream(200)},
		{"Chat", OpenAIChat, chatStream(200)},
	}
	buf := make([]byte, 32<<10)
	for _, s := range streams {
		readers := []struct {
			name string
			new  func() io.Reader
		}{
			{"EventReads", func() io.Reader { return &eventReader{stream: s.stream} }},
			{"32KiBReads", func() io.Reader { return struct{ io.Reader }{bytes.NewReader(s.stream)} }},
		}
		for _, reads := range readers {
			for _, via := range []string{"Copy", "Tap"} {
				b.Run(s.name+"/"+reads.name+"/"+via, func(b *testing.B) {
					b.ReportAllocs()
					b.SetBytes(int64(len(s.stream)))
					for b.Loop() {
						r := reads.new()
						var tap *Tap
						if via == "Tap" {
							tap = NewTap(s.kind, "text/event-stream", io.NopCloser(r))
							r = tap
						}
						// io.Discard would take the copy over through ReadFrom; a plain
						// writer keeps both paths on the same 32 KiB buffer.
						if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, r, buf); err != nil {
							b.Fatal(err)
						}
						if tap != nil {
							if _, _, final := tap.Result(); !final {
								b.Fatal("usage not final")
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkTapSSE5MBLine shows a 5 MB data line costs a copy into a bounded buffer.
func BenchmarkTapSSE5MBLine(b *testing.B) {
	stream := []byte(anthropicStart + "event: content_block_delta\ndata: {\"delta\":{\"text\":\"" + strings.Repeat("x", 5<<20) + "\"}}\n\n" + anthropicDelta)
	buf := make([]byte, 32<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		tap := NewTap(AnthropicMessages, "text/event-stream", io.NopCloser(bytes.NewReader(stream)))
		if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, tap, buf); err != nil {
			b.Fatal(err)
		}
	}
}
