package usage

import "encoding/json"

// anthropicWire is Anthropic's usage object. output_tokens_details.thinking_tokens is
// read where present; Anthropic otherwise counts thinking inside output_tokens. Like
// every wire struct here it is decoded by encoding/json, which matches keys without
// regard to case; the provider writes these objects, so that admits nothing a member
// controls.
type anthropicWire struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// anthropicUsage decodes a usage object; null, absent or malformed is no usage.
func anthropicUsage(raw json.RawMessage) (Usage, bool) {
	var w anthropicWire
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &w) != nil {
		return Usage{}, false
	}
	return w.usage()
}

// anthropicBody reads the usage of a whole JSON response in one decode; a body
// or usage that does not parse, or no usage object, is no usage.
func anthropicBody(body []byte) (Usage, bool) {
	var v struct {
		Usage *anthropicWire `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return v.Usage.usage()
}

func (w *anthropicWire) usage() (Usage, bool) {
	u := Usage{
		InputTokens:        w.InputTokens,
		CacheWriteTokens:   w.CacheCreationInputTokens,
		CacheWrite1hTokens: w.CacheCreation.Ephemeral1hInputTokens,
		CacheReadTokens:    w.CacheReadInputTokens,
		OutputTokens:       w.OutputTokens,
		ReasoningTokens:    w.OutputTokensDetails.ThinkingTokens,
	}
	return u, u.valid()
}

// anthropicEvent reads the Messages stream: message_start has the input and cache
// counts and the output so far, message_delta the cumulative output (newer API versions
// repeat the input and cache counts there, and server tools can raise them, so each
// non-zero count in it replaces the earlier one). The count is final only once
// message_delta follows message_start: a message_delta alone lacks the input counts.
func anthropicEvent(r *result, name, data []byte, truncated bool) {
	if truncated {
		return // usage and error events are small; an event this big is content
	}
	switch string(name) {
	case "message_start":
		// One decode: the usage object is typed in place.
		var ev struct {
			Message struct {
				Usage *anthropicWire `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Message.Usage == nil {
			return
		}
		if u, ok := ev.Message.Usage.usage(); ok {
			r.usage, r.seen, r.started = u, true, true
		}
	case "message_delta":
		var ev struct {
			Usage *anthropicWire `json:"usage"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Usage == nil {
			return
		}
		if u, ok := ev.Usage.usage(); ok {
			r.usage = latest(r.usage, u)
			r.seen, r.final = true, r.started
		}
	case "error":
		r.streamErr = errorName(data)
	}
}

// anthropicKeeps names the events anthropicEvent reads.
func anthropicKeeps(name []byte) bool {
	switch string(name) {
	case "message_start", "message_delta", "error":
		return true
	}
	return false
}

// latest takes each non-zero count of next over the one in prev.
func latest(prev, next Usage) Usage {
	pick := func(a, b int64) int64 {
		if b != 0 {
			return b
		}
		return a
	}
	return Usage{
		InputTokens:        pick(prev.InputTokens, next.InputTokens),
		CacheWriteTokens:   pick(prev.CacheWriteTokens, next.CacheWriteTokens),
		CacheWrite1hTokens: pick(prev.CacheWrite1hTokens, next.CacheWrite1hTokens),
		CacheReadTokens:    pick(prev.CacheReadTokens, next.CacheReadTokens),
		OutputTokens:       pick(prev.OutputTokens, next.OutputTokens),
		ReasoningTokens:    pick(prev.ReasoningTokens, next.ReasoningTokens),
	}
}
