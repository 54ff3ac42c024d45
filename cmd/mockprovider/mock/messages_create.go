package mock

import "crypto/rand"

// createMessage answers POST /v1/messages like the Anthropic Messages API.
func createMessage(x *exchange, req *request) reply {
	p := newPlan(req, x.k)
	u := p.usage
	x.rec.ID = "msg_" + rand.Text()
	stop := "end_turn"
	if p.truncated {
		stop = "max_tokens"
	}
	message := func(content []obj, stop any, u Usage) obj {
		return obj{
			"id": x.rec.ID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": x.usageField(anthropicUsage(u)),
		}
	}
	if !req.Stream {
		return reply{body: message([]obj{{"type": "text", "text": p.content()}}, stop, u), usage: &u}
	}

	// message_start reports the prompt and, as the real API does, one output token.
	start := Usage{InputTokens: u.InputTokens, OutputTokens: 1, CacheCreationInputTokens: u.CacheCreationInputTokens, CacheReadInputTokens: u.CacheReadInputTokens}
	events := []event{
		typed("message_start", obj{"message": message([]obj{}, nil, start)}),
		typed("content_block_start", obj{"index": 0, "content_block": obj{"type": "text", "text": ""}}),
		typed("ping", obj{}),
	}
	events[0].usage = &start
	for _, w := range p.words() {
		events = append(events, typed("content_block_delta", obj{"index": 0, "delta": obj{"type": "text_delta", "text": w}}))
	}
	// message_delta carries cumulative totals, so it repeats the input counts.
	delta := typed("message_delta", obj{
		"delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": x.usageField(anthropicUsage(u)),
	})
	delta.usage, delta.final = &u, true
	events = append(events,
		typed("content_block_stop", obj{"index": 0}),
		delta,
		typed("message_stop", obj{}),
	)
	return reply{events: events}
}

func anthropicUsage(u Usage) obj {
	return obj{
		"input_tokens":                u.InputTokens,
		"output_tokens":               u.OutputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens_details":       obj{"thinking_tokens": u.ReasoningTokens},
	}
}
