package usage

// anthropicWire is Anthropic's usage object. output_tokens_details.thinking_tokens is
// read where present; Anthropic otherwise counts thinking inside output_tokens. The
// input and cache counts are pointers because message_delta may leave them out (or
// send null), and then the earlier count stands; output_tokens is always there.
type anthropicWire struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1hInputTokens *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// anthropicUsage decodes a usage object; null, absent or malformed is no usage.
func anthropicUsage(raw []byte) (Usage, bool) {
	var w anthropicWire
	if len(raw) == 0 || raw[0] != '{' || unmarshal(raw, &w) != nil {
		return Usage{}, false
	}
	return w.over(Usage{}), true
}

// anthropicBody reads the usage of a whole JSON response in one decode; a body
// or usage that does not parse, or no usage object, is no usage.
func anthropicBody(body []byte) (Usage, bool) {
	var v struct {
		Usage *anthropicWire `json:"usage"`
	}
	if unmarshal(body, &v) != nil || v.Usage == nil {
		return Usage{}, false
	}
	return v.Usage.over(Usage{}), true
}

// over is prev with the counts w carries: output_tokens always (it is cumulative and
// required, so a final 0 means no output), every other count where w has it, as the
// SDKs accumulate a stream.
func (w *anthropicWire) over(prev Usage) Usage {
	u := prev
	u.OutputTokens = w.OutputTokens
	set(&u.InputTokens, w.InputTokens)
	set(&u.CacheWriteTokens, w.CacheCreationInputTokens)
	set(&u.CacheReadTokens, w.CacheReadInputTokens)
	if w.CacheCreation != nil {
		set(&u.CacheWrite1hTokens, w.CacheCreation.Ephemeral1hInputTokens)
	}
	if w.OutputTokensDetails != nil {
		set(&u.ReasoningTokens, w.OutputTokensDetails.ThinkingTokens)
	}
	return u
}

func set(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// anthropicEvent reads the Messages stream: message_start has the input and cache
// counts and the output so far, message_delta the cumulative output (newer API versions
// repeat the input and cache counts there, and server tools can raise them, so each
// count it carries replaces the earlier one, as in the SDKs' accumulators). The count
// is final only once message_delta follows message_start: a message_delta alone lacks
// the input counts.
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
		if unmarshal(data, &ev) != nil || ev.Message.Usage == nil {
			return
		}
		r.usage, r.seen, r.started = ev.Message.Usage.over(Usage{}), true, true
	case "message_delta":
		var ev struct {
			Usage *anthropicWire `json:"usage"`
		}
		if unmarshal(data, &ev) != nil || ev.Usage == nil {
			return
		}
		r.usage = ev.Usage.over(r.usage)
		r.seen, r.final = true, r.started
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
