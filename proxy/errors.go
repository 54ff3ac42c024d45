package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Kind is the class of a gateway-made error; each dialect names it its own way.
type Kind int

// The kinds of error the gateway produces itself.
const (
	KindInvalidRequest Kind = iota
	KindAuthentication
	KindPermission
	KindNotFound
	KindTooLarge
	KindRateLimit
	KindBudget
	KindUpstream
	KindUnavailable
	KindTimeout
	KindInternal
)

type kindInfo struct {
	status    int
	anthropic string // Anthropic error.type
	openai    string // OpenAI error.type
	code      string // OpenAI error.code
}

var kinds = map[Kind]kindInfo{
	KindInvalidRequest: {http.StatusBadRequest, "invalid_request_error", "invalid_request_error", "invalid_request"},
	KindAuthentication: {http.StatusUnauthorized, "authentication_error", "invalid_request_error", "invalid_api_key"},
	KindPermission:     {http.StatusForbidden, "permission_error", "invalid_request_error", "permission_denied"},
	KindNotFound:       {http.StatusNotFound, "not_found_error", "invalid_request_error", "not_found"},
	KindTooLarge:       {http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error", "request_too_large"},
	KindRateLimit:      {http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "rate_limit_exceeded"},
	KindBudget:         {http.StatusPaymentRequired, "billing_error", "insufficient_quota", "insufficient_quota"},
	KindUpstream:       {http.StatusBadGateway, "api_error", "api_error", "upstream_error"},
	KindUnavailable:    {http.StatusServiceUnavailable, "overloaded_error", "api_error", "service_unavailable"},
	KindTimeout:        {http.StatusGatewayTimeout, "timeout_error", "api_error", "upstream_timeout"},
	KindInternal:       {http.StatusInternalServerError, "api_error", "api_error", "internal_error"},
}

// Error is a refusal or failure the gateway answers itself, in the caller's
// provider's error shape so the SDKs raise their usual exception.
type Error struct {
	Kind    Kind
	Status  int // overrides the kind's status when non-zero (e.g. 431, 415)
	Message string
	code    string // for Outcome.Refusal where the call site has no better name
	fault   string // for Outcome.CredentialFault; never shown to the caller
}

func (e *Error) Error() string { return e.Message }

func (e *Error) status() int {
	if e.Status != 0 {
		return e.Status
	}
	return kinds[e.Kind].status
}

// WriteError sends err in the dialect's error shape. Headers already set on w
// (request id, rate-limit headers) are kept.
func WriteError(w http.ResponseWriter, d Dialect, err *Error) {
	info := kinds[err.Kind]
	var body any
	switch d {
	case DialectAnthropic:
		body = anthropicError{Type: "error", Error: anthropicErrorBody{Type: info.anthropic, Message: err.Message}}
	default:
		body = openAIError{Error: openAIErrorBody{Message: err.Message, Type: info.openai, Code: info.code}}
	}
	payload, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(payload)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(err.status())
	w.Write(payload)
}

type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// guessDialect picks the error shape before a route is known: the Anthropic SDK
// always sends anthropic-version and authenticates with x-api-key.
func guessDialect(r *http.Request) Dialect {
	if r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" {
		return DialectAnthropic
	}
	return DialectOpenAI
}
