package estimate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/proxy/estimate"
)

// agentBody is a realistic ~20 KB Anthropic Messages body: a system prompt with
// cache_control, two tools with JSON schemas, and a ten-turn conversation of text,
// tool_use and tool_result blocks.
func agentBody(tb testing.TB) []byte {
	tb.Helper()
	para := "The gateway reads the request body once, checks it strictly, estimates its cost and forwards the original bytes. "
	type obj = map[string]any
	tool := func(name string) obj {
		return obj{"name": name, "description": strings.Repeat("Runs "+name+" against the workspace and returns its output. ", 4),
			"input_schema": obj{"type": "object", "required": []string{"path"}, "properties": obj{
				"path":    obj{"type": "string", "description": "file path, relative to the workspace root"},
				"pattern": obj{"type": "string", "description": "a regular expression"},
				"limit":   obj{"type": "integer", "minimum": 1, "maximum": 1000}}}}
	}
	var msgs []obj
	for i := range 10 {
		msgs = append(msgs,
			obj{"role": "user", "content": []obj{{"type": "text", "text": strings.Repeat(para, 6)}}},
			obj{"role": "assistant", "content": []obj{
				{"type": "text", "text": strings.Repeat(para, 3)},
				{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", i), "name": "grep", "input": obj{"path": "proxy/", "pattern": "func .*", "limit": 50}}}},
			obj{"role": "user", "content": []obj{{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%02d", i),
				"content": "proxy/gateway.go:12: func New\nproxy/admit.go:40: func admit\n" + strings.Repeat("proxy/x.go:1: func f()\n", 5)}}})
	}
	body, err := json.Marshal(obj{
		"model": "claude-sonnet-4-5", "max_tokens": 8192, "stream": true, "temperature": 0.2,
		"system":   []obj{{"type": "text", "text": strings.Repeat(para, 24), "cache_control": obj{"type": "ephemeral"}}},
		"tools":    []obj{tool("grep"), tool("read_file")},
		"messages": msgs,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

func BenchmarkParse(b *testing.B) {
	body := agentBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := estimate.Parse(estimate.AnthropicMessages, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEncodingJSON is the same body through encoding/json into a
// generic map, for comparison.
func BenchmarkParseEncodingJSON(b *testing.B) {
	body := agentBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAgentBodyIsRealistic(t *testing.T) {
	t.Parallel()
	body := agentBody(t)
	if len(body) < 18_000 || len(body) > 24_000 {
		t.Errorf("agent body is %d bytes, want about 20 KB", len(body))
	}
	r, err := estimate.Parse(estimate.AnthropicMessages, body)
	if err != nil || r.Model != "claude-sonnet-4-5" || r.MaxOutputTokens != 8192 || !r.Stream {
		t.Errorf("Parse(agent body) = %+v, %v", r, err)
	}
}
