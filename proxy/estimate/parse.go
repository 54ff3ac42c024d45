package estimate

import (
	"bytes"
	"fmt"
	"unicode"
)

// Kind is the endpoint a body is for, which decides the fields Parse reads.
type Kind int

// The endpoints with a priced body. The zero Kind is none of them.
const (
	AnthropicMessages Kind = iota + 1 // POST /v1/messages
	OpenAIChat                        // POST /v1/chat/completions
	OpenAIResponses                   // POST /v1/responses
	OpenAIEmbeddings                  // POST /v1/embeddings
	OpenAICompletions                 // POST /v1/completions (legacy)
)

func (k Kind) String() string {
	switch k {
	case AnthropicMessages:
		return "anthropic-messages"
	case OpenAIChat:
		return "openai-chat"
	case OpenAIResponses:
		return "openai-responses"
	case OpenAIEmbeddings:
		return "openai-embeddings"
	case OpenAICompletions:
		return "openai-completions"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MaxOutputCeiling is the largest output ceiling a body may ask for (2^31 tokens);
// the model's own maximum, checked with the price, is usually far lower.
const MaxOutputCeiling = 1 << 31

// maxChoices bounds n and best_of (OpenAI allows at most 128).
const maxChoices = 128

// maxModelName bounds the model name, which ends up in errors, logs and the ledger.
const maxModelName = 256

// Request is what a hold depends on, read from a request body.
type Request struct {
	Kind            Kind
	Model           string
	Stream          bool
	IncludeUsage    bool   // stream_options.include_usage is true (OpenAI chat and completions)
	MaxOutputTokens int64  // the body's output ceiling; 0 when it sets none
	MaxOutputField  string // the field that ceiling is named by on this endpoint, e.g. max_tokens
	Choices         int64  // completions generated: n, or best_of when larger; 1 when absent
	InputTokens     int64  // EstimateInputTokens(body)
}

// redirects are top-level fields some gateways obey to pick another upstream or
// credential (LiteLLM's api_base, base_url, api_key), spelled without case,
// underscores or dashes. tollgate never obeys them and refuses them, so a client
// cannot believe it did.
var redirects = []string{"apibase", "baseurl", "apikey"}

// read are the top-level fields Parse may read; a key equal to one of them but for
// case is refused, because some JSON decoders (Go's encoding/json among them)
// match field names without case and would read it.
var read = []string{"model", "max_tokens", "max_completion_tokens", "max_output_tokens",
	"stream", "stream_options", "n", "best_of"}

// Parse reads body, already inflated, as a request of kind: the model, the output
// ceiling, the number of completions and the stream flags, plus an estimate of the
// input tokens. It refuses, with a *BodyError wrapping ErrInvalid, anything an
// upstream could read differently from the gateway: invalid or ambiguous JSON
// (duplicate keys at any depth, NaN, invalid UTF-8, unpaired surrogates, nesting
// past MaxDepth, anything but an object at the top), a missing or non-string model,
// an output ceiling that is not an integer from 1 to MaxOutputCeiling (n and
// best_of: 1 to 128), a case variant of a field it reads ("Model"), and the
// redirecting fields api_base, base_url and api_key. An unknown kind is a plain
// error: a bug in the caller, not the client.
func Parse(kind Kind, body []byte) (Request, error) {
	var f struct {
		model, maxTokens, maxCompletion, maxOutput, stream, streamOptions, n, bestOf []byte
	}
	err := scan(body, func(key, value []byte) error {
		switch string(key) {
		case "model":
			f.model = value
		case "max_tokens":
			f.maxTokens = value
		case "max_completion_tokens":
			f.maxCompletion = value
		case "max_output_tokens":
			f.maxOutput = value
		case "stream":
			f.stream = value
		case "stream_options":
			f.streamOptions = value
		case "n":
			f.n = value
		case "best_of":
			f.bestOf = value
		default:
			return oddKey(key)
		}
		return nil
	})
	if err != nil {
		return Request{}, err
	}
	r := Request{Kind: kind, Choices: 1, InputTokens: EstimateInputTokens(body)}
	if r.Model, err = modelName(f.model); err != nil {
		return Request{}, err
	}
	ceiling := func(field string, raw []byte) error {
		n, err := positive(field, raw, MaxOutputCeiling)
		if err == nil && n > r.MaxOutputTokens {
			r.MaxOutputTokens, r.MaxOutputField = n, field
		}
		return err
	}
	choices := func(field string, raw []byte) error {
		n, err := positive(field, raw, maxChoices)
		r.Choices = max(r.Choices, n)
		return err
	}
	switch kind {
	case AnthropicMessages:
		r.MaxOutputField = "max_tokens"
		err = ceiling("max_tokens", f.maxTokens)
	case OpenAIChat:
		// Both may be sent (max_tokens is the deprecated name): hold the larger.
		r.MaxOutputField = "max_completion_tokens"
		err = firstErr(ceiling("max_completion_tokens", f.maxCompletion), ceiling("max_tokens", f.maxTokens),
			choices("n", f.n))
	case OpenAIResponses:
		r.MaxOutputField = "max_output_tokens"
		err = ceiling("max_output_tokens", f.maxOutput)
	case OpenAIEmbeddings:
		return r, nil
	case OpenAICompletions:
		r.MaxOutputField = "max_tokens"
		err = firstErr(ceiling("max_tokens", f.maxTokens), choices("n", f.n), choices("best_of", f.bestOf))
	default:
		return Request{}, fmt.Errorf("estimate: parse: unknown kind %v", kind)
	}
	if err != nil {
		return Request{}, err
	}
	if r.Stream, err = boolean("stream", f.stream); err != nil {
		return Request{}, err
	}
	if kind == OpenAIChat || kind == OpenAICompletions {
		if r.IncludeUsage, err = includeUsage(f.streamOptions); err != nil {
			return Request{}, err
		}
	}
	return r, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// oddKey refuses a top-level key that only looks unread: a case variant of a field
// Parse reads, or a field that would redirect the call.
func oddKey(key []byte) error {
	for _, name := range read {
		if bytes.EqualFold(key, []byte(name)) {
			return invalidField(string(key), "%s is not a field of this API; did you mean %s? (refused so that no decoder reads it as %s)",
				shown([]byte(fmt.Sprintf("%q", key))), name, name)
		}
	}
	if len(key) > 16 {
		return nil
	}
	var buf [16]byte
	norm := buf[:0]
	for _, c := range key {
		switch {
		case c == '_' || c == '-':
		case 'A' <= c && c <= 'Z':
			norm = append(norm, c+'a'-'A')
		default:
			norm = append(norm, c)
		}
	}
	for _, name := range redirects {
		if string(norm) == name {
			return invalidField(string(key), "%q may not be set in the body: this gateway sends every request to its configured upstream with its own credential", key)
		}
	}
	return nil
}

func modelName(raw []byte) (string, error) {
	if raw == nil {
		return "", invalidField("model", "model is required")
	}
	if raw[0] != '"' {
		return "", invalidField("model", "model must be a non-empty string, got %s", shown(raw))
	}
	name := unescape(raw[1 : len(raw)-1])
	switch {
	case len(name) == 0:
		return "", invalidField("model", "model must be a non-empty string, got \"\"")
	case len(name) > maxModelName:
		return "", invalidField("model", "model must be at most %d bytes, got %d", maxModelName, len(name))
	case bytes.ContainsFunc(name, unicode.IsControl):
		return "", invalidField("model", "model must not contain control characters, got %s", shown(raw))
	}
	return string(name), nil
}

// positive reads an integer from 1 to limit; null or absent is 0. A float (even
// 1.0 or 1e3), a string or a negative number is refused: upstreams differ on them.
func positive(field string, raw []byte, limit int64) (int64, error) {
	if raw == nil || string(raw) == "null" {
		return 0, nil
	}
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' || n > limit {
			n = -1
			break
		}
		n = n*10 + int64(c-'0')
	}
	if n < 1 || n > limit {
		return 0, invalidField(field, "%s must be a positive integer no larger than %d, got %s", field, limit, shown(raw))
	}
	return n, nil
}

func boolean(field string, raw []byte) (bool, error) {
	switch string(raw) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, invalidField(field, "%s must be true or false, got %s", field, shown(raw))
}

func includeUsage(raw []byte) (bool, error) {
	if raw == nil || string(raw) == "null" {
		return false, nil
	}
	if raw[0] != '{' {
		return false, invalidField("stream_options", "stream_options must be an object, got %s", shown(raw))
	}
	var v []byte
	// Already checked as part of the body: this pass only finds the member.
	err := scan(raw, func(key, value []byte) error {
		if string(key) == "include_usage" {
			v = value
		} else if bytes.EqualFold(key, []byte("include_usage")) {
			return invalidField("stream_options."+string(key), "stream_options.%s is not a field of this API; did you mean include_usage?", shown(key))
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return boolean("stream_options.include_usage", v)
}
