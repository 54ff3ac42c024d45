package mock

import (
	"encoding/json"
	"strings"
)

// request holds the body fields the mock reads. The endpoints share it because their
// field names never collide.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	System              json.RawMessage `json:"system"`
	Messages            json.RawMessage `json:"messages"`
	Instructions        json.RawMessage `json:"instructions"`
	Input               json.RawMessage `json:"input"`
	EncodingFormat      string          `json:"encoding_format"`
}

// countInput stands in for a tokenizer: the UTF-8 bytes of all text in system, messages,
// instructions and input, divided by 4 and rounded up, at least 1. Text is found by
// textBytes.
func countInput(req *request) int64 {
	n := textBytes(req.System) + textBytes(req.Messages) + textBytes(req.Instructions) + textBytes(req.Input)
	return max(1, (n+3)/4)
}

// textBytes sums the text in a content value: a string counts its bytes, an array the sum
// of its elements, an object its "text" and "content" fields. That one rule covers
// Anthropic blocks, chat messages and parts, Responses items and embedding inputs;
// anything else (images, tool schemas, token arrays) counts nothing.
func textBytes(raw json.RawMessage) int64 {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return int64(len(s))
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		var n int64
		for _, el := range arr {
			n += textBytes(el)
		}
		return n
	}
	var o struct {
		Text    json.RawMessage `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return textBytes(o.Text) + textBytes(o.Content)
	}
	return 0
}

// plan is the completion the mock produces for a request.
type plan struct {
	usage     Usage // in Anthropic's convention; see openAIUsage
	text      int64 // visible output tokens
	truncated bool  // the request's cap was below the knob's length
}

// newPlan applies the output rule: the completion is the output-tokens knob long unless
// max_tokens, max_completion_tokens or max_output_tokens caps it lower, in which case it
// was truncated. Reasoning tokens are billed as output on top of the text. Cache knobs add
// to the prompt rather than carving it up, so they are reported exactly as given.
func newPlan(req *request, k knobs) plan {
	text, truncated := k.outputTokens, false
	for _, limit := range []*int64{req.MaxTokens, req.MaxCompletionTokens, req.MaxOutputTokens} {
		if limit != nil && *limit < text {
			text, truncated = max(0, *limit), true
		}
	}
	return plan{
		usage: Usage{
			InputTokens:              countInput(req),
			OutputTokens:             text + k.reasoning,
			CacheCreationInputTokens: k.cacheWrite,
			CacheReadInputTokens:     k.cacheRead,
			ReasoningTokens:          k.reasoning,
		},
		text:      text,
		truncated: truncated,
	}
}

// words is the completion split one token per piece: "tok", " tok", " tok", ...
func (p plan) words() []string {
	w := make([]string, p.text)
	for i := range w {
		w[i] = " tok"
	}
	if len(w) > 0 {
		w[0] = "tok"
	}
	return w
}

func (p plan) content() string { return strings.Join(p.words(), "") }

// openAIUsage converts to OpenAI's convention: prompt tokens include the cached ones, and
// there is no cache-write count.
func openAIUsage(u Usage) Usage {
	u.InputTokens += u.CacheReadInputTokens
	u.CacheCreationInputTokens = 0
	return u
}
