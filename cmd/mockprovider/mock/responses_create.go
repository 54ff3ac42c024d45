package mock

import (
	"crypto/rand"
	"time"
)

// createResponse answers POST /v1/responses like the OpenAI Responses API. A completion
// cut by max_output_tokens is "incomplete" and its stream ends with response.incomplete
// instead of response.completed, as the real API does; both carry the usage.
func createResponse(x *exchange, req *request) reply {
	p := newPlan(req, x.k)
	u := openAIUsage(p.usage)
	x.rec.ID = "resp_" + rand.Text()
	itemID := "msg_" + rand.Text()
	created := time.Now().Unix()
	status, incomplete := "completed", any(nil)
	if p.truncated {
		status, incomplete = "incomplete", obj{"reason": "max_output_tokens"}
	}
	text := p.content()
	part := func(text string) obj {
		return obj{"type": "output_text", "text": text, "annotations": []any{}}
	}
	item := func(status string, content []obj) obj {
		return obj{"type": "message", "id": itemID, "status": status, "role": "assistant", "content": content}
	}
	response := func(status string, output []obj, usage, incomplete any) obj {
		return obj{
			"id": x.rec.ID, "object": "response", "created_at": created, "status": status,
			"model": req.Model, "output": output, "usage": usage,
			"incomplete_details": incomplete, "error": nil,
		}
	}
	final := response(status, []obj{item(status, []obj{part(text)})}, x.usageField(obj{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  obj{"cached_tokens": u.CacheReadInputTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": obj{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}), incomplete)
	if !req.Stream {
		return reply{body: final, usage: &u}
	}

	var events []event
	add := func(typ string, data obj) {
		data["sequence_number"] = len(events)
		events = append(events, typed(typ, data))
	}
	at := func(data obj) obj { // the position fields of content events
		data["item_id"], data["output_index"], data["content_index"] = itemID, 0, 0
		return data
	}
	add("response.created", obj{"response": response("in_progress", []obj{}, nil, nil)})
	add("response.output_item.added", obj{"output_index": 0, "item": item("in_progress", []obj{})})
	add("response.content_part.added", at(obj{"part": part("")}))
	for _, w := range p.words() {
		add("response.output_text.delta", at(obj{"delta": w, "logprobs": []any{}}))
	}
	add("response.output_text.done", at(obj{"text": text, "logprobs": []any{}}))
	add("response.content_part.done", at(obj{"part": part(text)}))
	add("response.output_item.done", obj{"output_index": 0, "item": item(status, []obj{part(text)})})
	add("response."+status, obj{"response": final})
	events[len(events)-1].usage, events[len(events)-1].final = &u, true
	return reply{events: events}
}
