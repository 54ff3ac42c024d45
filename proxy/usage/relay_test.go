package usage

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestDropUsageChunk: a stream told to drop the usage chunk passes every other
// byte as sent, whatever the line endings and however the body is split, and
// still reports the usage; a usage on a content chunk, a comment and a huge
// event pass.
func TestDropUsageChunk(t *testing.T) {
	t.Parallel()
	content := `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`
	usageOnly := `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	onContent := `data: {"choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	huge := `data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", maxHeldBytes) + `"}}]}`
	for _, c := range []struct {
		name   string
		events []string // the stream; those marked "-" are to be dropped
		eol    string
	}{
		{"lf", []string{content, "-" + usageOnly, "data: [DONE]"}, "\n"},
		{"crlf", []string{content, "-" + usageOnly, "data: [DONE]"}, "\r\n"},
		{"cr", []string{content, "-" + usageOnly, "data: [DONE]"}, "\r"},
		{"comment and huge event", []string{": keep-alive", huge, content, "-" + usageOnly, "data: [DONE]"}, "\n"},
		{"usage on a content chunk", []string{content, onContent, "data: [DONE]"}, "\n"},
		{"usage last, no blank line", []string{content, "-" + usageOnly}, ""},
	} {
		var sent, want strings.Builder
		for i, ev := range c.events {
			dropped := strings.HasPrefix(ev, "-")
			ev = strings.TrimPrefix(ev, "-")
			eol := c.eol
			if eol == "" {
				eol = "\n"
				if i == len(c.events)-1 {
					eol = ""
				}
			}
			frame := ev + eol + eol
			if c.eol == "" && i == len(c.events)-1 {
				frame = ev
			}
			sent.WriteString(frame)
			if !dropped {
				want.WriteString(frame)
			}
		}
		for seed := range uint64(20) {
			tap := NewTap(OpenAIChat, eventStream, io.NopCloser(newChunkReader([]byte(sent.String()), seed, 1+int(seed)*7)))
			if !tap.DropUsageChunk() {
				t.Fatal("a chat stream should be relayed")
			}
			var out bytes.Buffer
			if _, err := io.Copy(&out, tap); err != nil {
				t.Fatal(err)
			}
			tap.Close()
			if out.String() != want.String() {
				t.Fatalf("%s, seed %d: got\n%q\nwant\n%q", c.name, seed, out.String(), want.String())
			}
			if u, _, final := tap.Result(); !final || u.OutputTokens != 2 || u.InputTokens != 3 {
				t.Fatalf("%s, seed %d: usage %+v final %v", c.name, seed, u, final)
			}
		}
	}
}

// TestDropUsageChunkOnlyForChat: other streams and JSON bodies are not relayed.
func TestDropUsageChunkOnlyForChat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind Kind
		ct   string
	}{{AnthropicMessages, eventStream}, {OpenAIResponses, eventStream}, {OpenAIChat, appJSON}} {
		if NewTap(c.kind, c.ct, io.NopCloser(strings.NewReader(""))).DropUsageChunk() {
			t.Errorf("kind %d, %s: relayed", c.kind, c.ct)
		}
	}
}
