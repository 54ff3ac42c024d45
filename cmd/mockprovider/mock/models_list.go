package mock

import "time"

// listModels answers GET /v1/models. Both APIs have it with different list shapes; one
// body carries the fields of both, since each SDK ignores the other's.
func listModels(_ *exchange, _ *request) reply {
	ids := []string{"claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "gpt-5.4-mini", "gpt-5.5", "text-embedding-3-small"}
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	data := make([]obj, len(ids))
	for i, id := range ids {
		data[i] = obj{
			"id": id, "object": "model", "type": "model", "display_name": id,
			"created": created.Unix(), "created_at": created.Format(time.RFC3339), "owned_by": "mock",
		}
	}
	return reply{body: obj{
		"object": "list", "data": data,
		"has_more": false, "first_id": ids[0], "last_id": ids[len(ids)-1],
	}}
}
