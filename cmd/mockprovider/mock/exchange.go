package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

type provider int

const (
	openAI provider = iota
	anthropic
)

// exchange is one provider request being answered; every response goes out through its
// fail, send or stream so the Record always matches what was written.
type exchange struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	p         provider // whose credential and error shapes apply
	k         knobs
	seq       uint64
	rec       Record
	committed bool
}

// obj keeps the many JSON literals short.
type obj = map[string]any

// reply is what an endpoint handler produces: a JSON body or an SSE stream.
type reply struct {
	body   any
	usage  *Usage // the usage body reports; nil if none
	events []event
}

// event is one SSE event.
type event struct {
	name  string // the event field; OpenAI chat chunks have none
	data  any    // marshalled to JSON, or sent verbatim if []byte
	usage *Usage // usage the client knows once this event arrives
	final bool   // usage is the final count
}

// doneData ends an OpenAI chat stream.
var doneData = []byte("[DONE]")

// typed returns an event named after its data's "type", as Anthropic and the Responses
// API send them.
func typed(typ string, data obj) event {
	data["type"] = typ
	return event{name: typ, data: data}
}

// openAIPaths are the endpoints only OpenAI has.
var openAIPaths = map[string]bool{"/v1/chat/completions": true, "/v1/responses": true, "/v1/embeddings": true}

// providerOf says whose credential and error shape a request gets: Anthropic
// for its Messages paths, OpenAI for its own, and for the rest (/v1/models,
// which both have, and unknown paths, whose 404 must parse in the caller's
// SDK) whoever the request's headers say it came from.
func providerOf(r *http.Request) provider {
	switch path := r.URL.Path; {
	case path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/"):
		return anthropic
	case openAIPaths[path]:
		return openAI
	case r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "":
		return anthropic
	}
	return openAI
}

func (s *Server) begin(w http.ResponseWriter, r *http.Request) *exchange {
	return &exchange{s: s, w: w, r: r, p: providerOf(r), seq: s.arrived.Add(1), rec: Record{
		Time:         time.Now(),
		Method:       r.Method,
		Path:         r.URL.Path,
		RawPath:      r.URL.RawPath,
		RawQuery:     r.URL.RawQuery,
		AuthHeader:   r.Header.Get("Authorization"),
		APIKeyHeader: r.Header.Get("X-Api-Key"),
		Headers:      r.Header.Clone(),
	}}
}

func (x *exchange) authorized() bool {
	if x.p == anthropic {
		return x.s.opts.AnthropicKey == "" || x.r.Header.Get("X-Api-Key") == x.s.opts.AnthropicKey
	}
	return x.s.opts.OpenAIKey == "" || x.r.Header.Get("Authorization") == "Bearer "+x.s.opts.OpenAIKey
}

// commit adds the record to the log once; later changes to x.rec are not seen.
func (x *exchange) commit() {
	if !x.committed {
		x.committed = true
		x.s.add(x.seq, x.rec)
	}
}

// wait sleeps for d unless the client goes away first, and reports whether it is still there.
func (x *exchange) wait(d time.Duration) bool {
	ctx := x.r.Context()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		x.rec.Disconnected = true
		return false
	}
	return true
}

// fail sends an error in the provider's shape.
func (x *exchange) fail(status int, msg string) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == 529 {
		x.w.Header().Set("Retry-After", "1")
	}
	x.respond(status, errorBody(x.p, status, msg))
}

func (x *exchange) send(rep reply) {
	if rep.events != nil {
		x.stream(rep.events)
		return
	}
	if rep.usage != nil && !x.k.omitUsage {
		x.rec.Usage, x.rec.UsageReported = *rep.usage, true
	}
	x.respond(http.StatusOK, rep.body)
}

func (x *exchange) respond(status int, body any) {
	x.rec.Status = status
	x.commit() // before writing, so a client that has read the response finds its record
	writeJSON(x.w, status, body)
}

// stream writes events one by one, flushing each, and stops early when the client leaves
// or X-Mock-Disconnect-After-Events says to cut.
func (x *exchange) stream(events []event) {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	x.w.WriteHeader(http.StatusOK)
	x.rec.Status = http.StatusOK
	rc := http.NewResponseController(x.w)
	if !x.flush(rc) {
		return
	}
	for i, ev := range events {
		if i == x.k.disconnectAfter {
			// Abort like a dying upstream: HTTP/1.1 closes without the final chunk,
			// HTTP/2 resets the stream. The deferred commit still runs.
			x.rec.Disconnected = true
			panic(http.ErrAbortHandler)
		}
		d := x.k.interval
		if i == 0 {
			d = 0
		}
		if !x.wait(d) {
			return
		}
		last := i == len(events)-1
		if last {
			x.note(ev)
			x.commit() // before writing, so a client that has read the stream finds its record
		}
		if _, err := x.w.Write(ev.encode()); err != nil || !x.flush(rc) {
			x.rec.Disconnected = true
			return
		}
		x.note(ev)
	}
}

func (x *exchange) flush(rc *http.ResponseController) bool {
	err := rc.Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		x.rec.Disconnected = true
		return false
	}
	return true
}

// note records the usage an event has delivered.
func (x *exchange) note(ev event) {
	if ev.usage != nil && !x.k.omitUsage {
		x.rec.Usage, x.rec.UsageReported = *ev.usage, ev.final
	}
}

// usageField is the value of a body's "usage" field: nil when X-Mock-Omit-Usage is set.
func (x *exchange) usageField(u obj) any {
	if x.k.omitUsage {
		return nil
	}
	return u
}

func (ev event) encode() []byte {
	var b bytes.Buffer
	if ev.name != "" {
		b.WriteString("event: " + ev.name + "\n")
	}
	data, ok := ev.data.([]byte)
	if !ok {
		data, _ = json.Marshal(ev.data) // the handlers' literals always marshal
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

func errorBody(p provider, status int, msg string) obj {
	if p == anthropic {
		return obj{"type": "error", "error": obj{"type": anthropicErrorType(status), "message": msg}}
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return obj{"error": obj{"message": msg, "type": typ, "param": nil, "code": nil}}
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b) // nothing left to tell a client that is gone
}
