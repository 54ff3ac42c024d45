package usage

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// openAIWire is OpenAI's usage object in both namings: chat, legacy completions and
// embeddings say prompt/completion, the Responses API input/output. Compatible servers
// sometimes send both names with the same count, so the larger is taken, never the sum.
type openAIWire struct {
	PromptTokens            int64        `json:"prompt_tokens"`
	InputTokens             int64        `json:"input_tokens"`
	CompletionTokens        int64        `json:"completion_tokens"`
	OutputTokens            int64        `json:"output_tokens"`
	PromptTokensDetails     cachedWire   `json:"prompt_tokens_details"`
	InputTokensDetails      cachedWire   `json:"input_tokens_details"`
	CompletionTokensDetails thinkingWire `json:"completion_tokens_details"`
	OutputTokensDetails     thinkingWire `json:"output_tokens_details"`
}

type cachedWire struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type thinkingWire struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// openAIUsage decodes a usage object; null, absent or malformed is no usage. OpenAI
// counts cached tokens inside the input, so they are taken out of InputTokens.
func openAIUsage(raw []byte) (Usage, bool) {
	var w openAIWire
	if len(raw) == 0 || raw[0] != '{' || unmarshal(raw, &w) != nil {
		return Usage{}, false
	}
	return w.usage(), true
}

// openAIBody reads the usage of a whole JSON response in one decode; a body or
// usage that does not parse, or no usage object, is no usage.
func openAIBody(body []byte) (Usage, bool) {
	var v struct {
		Usage *openAIWire `json:"usage"`
	}
	if unmarshal(body, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return v.Usage.usage(), true
}

func (w *openAIWire) usage() Usage {
	prompt := either(w.PromptTokens, w.InputTokens)
	cached := either(w.PromptTokensDetails.CachedTokens, w.InputTokensDetails.CachedTokens)
	u := Usage{
		InputTokens:     prompt - cached,
		CacheReadTokens: cached,
		OutputTokens:    either(w.CompletionTokens, w.OutputTokens),
		ReasoningTokens: either(w.CompletionTokensDetails.ReasoningTokens, w.OutputTokensDetails.ReasoningTokens),
	}
	// More cached than input is the provider's inconsistency; charging the cached
	// tokens and no negative input keeps the cost from dropping below either count.
	// A negative count itself is kept, for the gateway to judge.
	if prompt >= 0 && cached >= 0 {
		u.InputTokens = max(u.InputTokens, 0)
	} else {
		u.InputTokens = min(prompt, cached)
	}
	return u
}

// either is the larger of a count's two namings, or the negative one: a negative
// count must reach the plausibility check, not hide behind a 0 in the other name.
func either(a, b int64) int64 {
	if a < 0 || b < 0 {
		return min(a, b)
	}
	return max(a, b)
}

// chatEvent reads a chat (or legacy completions) stream: usage is in the chunk whose
// usage is an object, usually the last with no choices; every other chunk has none or
// "usage":null. Chunks are checked for a usage or error object before being parsed, so
// the hundreds of content chunks cost a scan, not a JSON decode.
func chatEvent(r *result, name, data []byte, truncated bool) {
	if truncated {
		return // usage and error chunks are small; a chunk this big is content
	}
	if string(name) == "error" {
		r.streamErr = errorName(data)
		return
	}
	if !hasObjectMember(data, usageKey) && !hasObjectMember(data, errorKey) {
		return
	}
	var ev struct {
		Usage jsontext.Value `json:"usage"`
		Error jsontext.Value `json:"error"`
	}
	if unmarshal(data, &ev) != nil {
		return
	}
	if u, ok := openAIUsage(ev.Usage); ok {
		r.usage, r.seen, r.final = u, true, true
	}
	if len(ev.Error) > 0 && ev.Error[0] == '{' {
		r.streamErr = errorName(data)
	}
}

// responsesEvent reads a Responses stream: the usage is in the response that
// response.completed, response.incomplete or response.failed carries. That event holds
// the whole response, so it can pass maxEventBytes; then its usage is looked for in the
// tail kept (usageInTail), and if it is not there the count is not final.
func responsesEvent(r *result, name, data []byte, truncated bool) {
	switch string(name) {
	case "response.completed", "response.incomplete", "response.failed":
		var raw jsontext.Value
		if truncated {
			raw = usageInTail(data, 2)
		} else {
			var ev struct {
				Response struct {
					Usage jsontext.Value `json:"usage"`
					Error jsontext.Value `json:"error"`
				} `json:"response"`
			}
			if unmarshal(data, &ev) != nil {
				return
			}
			raw = ev.Response.Usage
			if e := ev.Response.Error; len(e) > 0 && e[0] == '{' {
				r.streamErr = errorName(e)
			}
		}
		if u, ok := openAIUsage(raw); ok {
			r.usage, r.seen, r.final = u, true, true
		}
	case "error":
		r.streamErr = errorName(data)
	}
}

// responsesKeeps names the events responsesEvent reads.
func responsesKeeps(name []byte) bool {
	switch string(name) {
	case "response.completed", "response.incomplete", "response.failed", "error":
		return true
	}
	return false
}

var usageKey, errorKey = []byte(`"usage"`), []byte(`"error"`)

// hasObjectMember reports whether data has the quoted key followed by an object, as
// a cheap test before decoding. It can say yes for a key nested deeper, never no for
// one that is there.
func hasObjectMember(data, quotedKey []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], quotedKey)
		if j < 0 {
			return false
		}
		i += j + len(quotedKey)
		k := skipSpace(data, i)
		if k < len(data) && data[k] == ':' {
			if k = skipSpace(data, k+1); k < len(data) && data[k] == '{' {
				return true
			}
		}
	}
}
