package usage

import "testing"

func TestKindFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dialect, method, path string
		want                  Kind
	}{
		{"anthropic", "POST", "/v1/messages", AnthropicMessages},
		{"anthropic", "POST", "/anthropic/v1/messages", AnthropicMessages},
		{"anthropic", "POST", "/v1/messages/count_tokens", Unknown},
		{"anthropic", "POST", "/v1/messages/batches", Unknown},
		{"anthropic", "GET", "/v1/messages", Unknown},
		{"anthropic", "POST", "/v1/chat/completions", Unknown},
		{"openai", "POST", "/v1/chat/completions", OpenAIChat},
		{"openai", "POST", "/openai/v1/chat/completions", OpenAIChat},
		{"openai", "POST", "/openai/deployments/gpt-4o/chat/completions", OpenAIChat},
		{"openai", "POST", "/v1/completions", OpenAICompletions},
		{"openai", "POST", "/v1/responses", OpenAIResponses},
		{"openai", "POST", "/v1/responses/resp_123/cancel", Unknown},
		{"openai", "GET", "/v1/responses/resp_123", Unknown},
		{"openai", "POST", "/v1/embeddings", OpenAIEmbeddings},
		{"openai", "POST", "/v1/messages", Unknown},
		{"openai", "GET", "/v1/models", Unknown},
		{"generic", "POST", "/v1/chat/completions", Unknown},
		{"", "POST", "/v1/messages", Unknown},
	}
	for _, c := range cases {
		if got := KindFor(c.dialect, c.method, c.path); got != c.want {
			t.Errorf("KindFor(%q, %q, %q) = %v, want %v", c.dialect, c.method, c.path, got, c.want)
		}
	}
}
