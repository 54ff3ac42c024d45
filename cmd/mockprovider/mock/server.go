// Package mock is a fake Anthropic and OpenAI upstream for tests, demos and load tests.
//
// It answers the Messages (and its count_tokens), Chat Completions, Responses, Embeddings and Models endpoints in
// shapes the official SDKs parse, counts tokens by a fixed rule (see countInput), and keeps
// its own log of the usage it reported, so a test can compare what the gateway billed with
// what the upstream actually said. X-Mock-* request headers change its behaviour per
// request (see parseKnobs); being plain headers, they pass through a proxy.
package mock

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Server. Latency, EventInterval and OutputTokens can be overridden
// per request by X-Mock-* headers.
type Options struct {
	AnthropicKey  string        // x-api-key required on Anthropic endpoints; "" accepts any
	OpenAIKey     string        // Bearer token required on OpenAI endpoints; "" accepts any
	Latency       time.Duration // wait before the response headers
	EventInterval time.Duration // wait between SSE events
	OutputTokens  int           // completion length when the request doesn't cap it lower; 0 means 16
	LogWriter     io.Writer     // optional: one JSON line appended per Record
	// NoRecords keeps no log in memory (GET /_mock/records answers 404). A load
	// test's mock serves hundreds of thousands of requests: holding each one's
	// record, headers included, stalled every answer while the log's slice grew
	// and the GC marked it.
	NoRecords bool
	// RequestsPerMinute and TokensPerMinute are the account's own limits,
	// shared by every request: each answer carries the provider's rate-limit
	// headers, and a request past either gets 429 (0: no limit).
	RequestsPerMinute int
	TokensPerMinute   int
}

// Server is the fake upstream, an http.Handler safe for concurrent use.
type Server struct {
	opts    Options
	account *account      // nil without an account limit
	arrived atomic.Uint64 // numbers requests so the log keeps arrival order

	mu      sync.Mutex
	entries []entry // sorted by seq
}

type entry struct {
	seq uint64
	rec Record
}

// New returns a Server with an empty log.
func New(opts Options) *Server {
	if opts.OutputTokens <= 0 {
		opts.OutputTokens = 16
	}
	return &Server{opts: opts, account: newAccount(opts.RequestsPerMinute, opts.TokensPerMinute)}
}

// Records returns a copy of the log in arrival order. A request appears once its response
// is decided, before the client can have read all of it.
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := make([]Record, len(s.entries))
	for i, e := range s.entries {
		recs[i] = e.rec
	}
	return recs
}

// Reset empties the log.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = nil
}

func (s *Server) add(seq uint64, rec Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opts.NoRecords {
		i, _ := slices.BinarySearchFunc(s.entries, seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
		s.entries = slices.Insert(s.entries, i, entry{seq, rec})
	}
	if s.opts.LogWriter != nil {
		line, _ := json.Marshal(rec) // a Record always marshals
		// Written under the lock so lines never interleave. A failed write loses only the
		// file copy; Records still has the entry.
		_, _ = s.opts.LogWriter.Write(append(line, '\n'))
	}
}

// endpoints maps "METHOD /path" to the handler that builds the reply.
var endpoints = map[string]func(*exchange, *request) reply{
	"POST /v1/messages":              createMessage,
	"POST /v1/messages/count_tokens": countMessageTokens,
	"POST /v1/chat/completions":      createChatCompletion,
	"POST /v1/responses":             createResponse,
	"POST /v1/embeddings":            createEmbeddings,
	"GET /v1/models":                 listModels,
}

// ServeHTTP serves the provider endpoints plus GET /_mock/records and POST /_mock/reset.
//
// Every provider request is logged. It goes through the steps in the order a real API
// would reject it: knob headers, latency, credential, JSON body, requested failure.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	switch route {
	case "GET /_mock/records":
		if s.opts.NoRecords {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "this mock keeps no records (-records=false)"})
			return
		}
		writeJSON(w, http.StatusOK, s.Records())
		return
	case "POST /_mock/reset":
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	}

	x := s.begin(w, r)
	defer x.commit()
	body, err := io.ReadAll(r.Body)
	x.rec.BodyBytes, x.rec.Body = len(body), body // as sent, before any inflating
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		body, err = gunzip(body)
	}
	handle, ok := endpoints[route]
	switch {
	case !ok:
		x.fail(http.StatusNotFound, "Unknown request URL: "+route)
		return
	case err != nil:
		x.fail(http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	if x.k, err = parseKnobs(r.Header, s.opts); err != nil {
		x.fail(http.StatusBadRequest, err.Error())
		return
	}
	if !x.wait(x.k.latency) {
		return
	}
	if !x.authorized() {
		x.fail(http.StatusUnauthorized, "invalid credential")
		return
	}
	var req request
	if r.Method == http.MethodPost {
		if err := json.Unmarshal(body, &req); err != nil {
			x.fail(http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
	}
	x.rec.Model, x.rec.Stream = req.Model, req.Stream
	if s.account != nil && s.account.admit(w.Header(), x.p, countInput(&req)+min(x.k.outputTokens, capOf(&req))) > 0 {
		x.fail(http.StatusTooManyRequests, "rate limit exceeded: the account's requests or tokens per minute (mock -rpm, -tpm)")
		return
	}
	if x.k.failStatus != 0 {
		x.fail(x.k.failStatus, "failure requested by X-Mock-Fail-Status")
		return
	}
	x.send(handle(x, &req))
}

// capOf is the output the request caps itself at, or no cap.
func capOf(req *request) int64 {
	for _, c := range []*int64{req.MaxTokens, req.MaxCompletionTokens, req.MaxOutputTokens} {
		if c != nil {
			return *c
		}
	}
	return math.MaxInt64
}

// gunzip reads a gzip request body, as the real APIs accept one.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 64<<20))
}
