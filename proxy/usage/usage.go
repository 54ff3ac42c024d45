// Package usage reads the token usage a provider reports out of an upstream response
// while it streams to the client, so the gateway can settle every request from the
// provider's own count. A Tap never buffers, delays or alters the stream: the bytes the
// client reads are the upstream's bytes, and only a bounded part of each event is kept;
// the one exception is a stream told to drop the usage chunk the gateway asked for
// (Tap.DropUsageChunk), which passes on whole events less that one.
package usage

import (
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Usage is token usage normalised across providers, so that a request's cost is the sum
// over the four priced classes of tokens × price:
//   - InputTokens: uncached input (Anthropic input_tokens; OpenAI prompt_tokens or
//     input_tokens minus the cached tokens, which OpenAI counts inside them).
//   - CacheWriteTokens: Anthropic cache_creation_input_tokens (OpenAI has none);
//     CacheWrite1hTokens is the part of it written for one hour
//     (cache_creation.ephemeral_1h_input_tokens), which is priced higher.
//   - CacheReadTokens: Anthropic cache_read_input_tokens; OpenAI cached_tokens.
//   - OutputTokens: all output, reasoning included.
//
// ReasoningTokens is an informational subset of OutputTokens and is not priced apart.
//
// A Usage is what the provider said, not what is true: counts are kept as reported,
// negative or absurd ones included, and the gateway judges them against the request
// before charging them.
type Usage struct {
	InputTokens        int64
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	CacheReadTokens    int64
	OutputTokens       int64
	ReasoningTokens    int64
}

// unmarshal decodes a provider's JSON as its SDKs read it: member names match
// exactly, where encoding/json would also take "Usage" for "usage" and keep whichever
// came last; a name given twice in one object is refused as ambiguous (the request
// keeps its hold); invalid UTF-8 inside content does not cost the usage.
func unmarshal(data []byte, v any) error {
	return json.Unmarshal(data, v, jsontext.AllowInvalidUTF8(true))
}

// Kind is the provider endpoint a response comes from; it decides where usage is.
type Kind int

// The endpoints whose usage a Tap can read.
const (
	Unknown Kind = iota
	AnthropicMessages
	OpenAIChat
	OpenAIResponses
	OpenAIEmbeddings
	OpenAICompletions // the legacy /v1/completions
)

// KindFor names the endpoint a request goes to. It matches the end of the upstream path,
// so a prefix left by a route rewrite (/openai/v1/chat/completions) or an Azure
// deployment path (/openai/deployments/x/chat/completions) still matches. A generic
// route is Unknown: its upstream is no known provider, so nothing it sends is taken as
// usage and the caller keeps the hold.
func KindFor(dialect, method, upstreamPath string) Kind {
	if method != http.MethodPost {
		return Unknown
	}
	switch dialect {
	case "anthropic":
		if strings.HasSuffix(upstreamPath, "/v1/messages") {
			return AnthropicMessages
		}
	case "openai":
		switch {
		case strings.HasSuffix(upstreamPath, "/chat/completions"):
			return OpenAIChat
		case strings.HasSuffix(upstreamPath, "/completions"):
			return OpenAICompletions
		case strings.HasSuffix(upstreamPath, "/responses"):
			return OpenAIResponses
		case strings.HasSuffix(upstreamPath, "/embeddings"):
			return OpenAIEmbeddings
		}
	}
	return Unknown
}
