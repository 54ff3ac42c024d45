package usage_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/tollgate/proxy/usage"
)

func ExampleTap() {
	upstream := io.NopCloser(strings.NewReader("event: message_start\n" +
		`data: {"type":"message_start","message":{"usage":{"input_tokens":25,"cache_read_input_tokens":100,"output_tokens":1}}}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","usage":{"output_tokens":15}}` + "\n\n"))

	kind := usage.KindFor("anthropic", "POST", "/anthropic/v1/messages")
	tap := usage.NewTap(kind, "text/event-stream", upstream)
	n, _ := io.Copy(io.Discard, tap) // the proxy copies the tap to the client
	tap.Close()

	u, seen, final := tap.Result()
	fmt.Println(n > 0, seen, final)
	fmt.Printf("%+v\n", u)
	// Output:
	// true true true
	// {InputTokens:25 CacheWriteTokens:0 CacheWrite1hTokens:0 CacheReadTokens:100 OutputTokens:15 ReasoningTokens:0}
}

func ExampleInjectIncludeUsage() {
	body := []byte(`{"model":"gpt-4o","stream":true,"seed":12345678901234567890}`)
	out, changed, err := usage.InjectIncludeUsage(body)
	fmt.Println(string(out), changed, err)
	// Output:
	// {"model":"gpt-4o","stream":true,"seed":12345678901234567890,"stream_options":{"include_usage":true}} true <nil>
}
