package mock

import (
	"crypto/rand"
	"time"
)

// createChatCompletion answers POST /v1/chat/completions like OpenAI. A stream reports
// usage only when stream_options.include_usage asks for it, in a last chunk with no choices.
func createChatCompletion(x *exchange, req *request) reply {
	p := newPlan(req, x.k)
	u := openAIUsage(p.usage)
	x.rec.ID = "chatcmpl-" + rand.Text()
	created := time.Now().Unix()
	finish := "stop"
	if p.truncated {
		finish = "length"
	}
	usage := x.usageField(obj{
		"prompt_tokens":             u.InputTokens,
		"completion_tokens":         u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     obj{"cached_tokens": u.CacheReadInputTokens},
		"completion_tokens_details": obj{"reasoning_tokens": u.ReasoningTokens},
	})
	if !req.Stream {
		return reply{body: obj{
			"id": x.rec.ID, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []obj{{
				"index":         0,
				"message":       obj{"role": "assistant", "content": p.content(), "refusal": nil},
				"finish_reason": finish,
				"logprobs":      nil,
			}},
			"usage": usage,
		}, usage: &u}
	}

	chunk := func(choices []obj) obj {
		return obj{"id": x.rec.ID, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
	}
	choice := func(delta obj, finish any) event {
		return event{data: chunk([]obj{{"index": 0, "delta": delta, "finish_reason": finish}})}
	}
	events := []event{choice(obj{"role": "assistant", "content": ""}, nil)}
	for _, w := range p.words() {
		events = append(events, choice(obj{"content": w}, nil))
	}
	events = append(events, choice(obj{}, finish))
	if req.StreamOptions.IncludeUsage && !x.k.omitUsage {
		last := chunk([]obj{})
		last["usage"] = usage
		events = append(events, event{data: last, usage: &u, final: true})
	}
	return reply{events: append(events, event{data: doneData})}
}
