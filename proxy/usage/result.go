package usage

import "encoding/json"

// result is what the extractors have learned from one response so far.
type result struct {
	usage     Usage
	seen      bool   // some usage was reported
	final     bool   // the provider's final count was seen
	started   bool   // Anthropic: message_start carried usage
	streamErr string // the error a provider sent mid-stream, if any
}

// eventFunc reads one SSE event into r. truncated says data is only the tail of an
// event larger than maxEventBytes.
type eventFunc func(r *result, name, data []byte, truncated bool)

// maxErrorNameBytes bounds the provider's error name kept for the ledger and logs.
const maxErrorNameBytes = 64

// errorWire covers the error shapes providers stream: Anthropic
// {"type":"error","error":{"type":"overloaded_error"}}, OpenAI chat
// {"error":{"type":"server_error","code":null}}, the Responses error event
// {"type":"error","code":"..."} and a failed response's {"code":"..."}.
type errorWire struct {
	Type  string          `json:"type"`
	Code  json.RawMessage `json:"code"`
	Error *errorWire      `json:"error"`
}

// errorName names an error object by its code, else its type, else "error": any error
// event counts, even one that does not parse.
func errorName(data []byte) string {
	var e errorWire
	_ = json.Unmarshal(data, &e)
	w := &e
	if w.Error != nil {
		w = w.Error
	}
	var code string
	_ = json.Unmarshal(w.Code, &code)
	name := "error"
	switch {
	case code != "":
		name = code
	case w.Type != "" && w.Type != "error":
		name = w.Type
	}
	if len(name) > maxErrorNameBytes {
		name = name[:maxErrorNameBytes]
	}
	return name
}
