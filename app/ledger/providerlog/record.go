// Package providerlog is the format of a provider's own log of the requests it
// served and the usage it reported: what `tollgate admin reconcile
// --provider-log` compares the ledger with. The mock provider writes it. It is
// a package of its own so the gateway reads the format without compiling the
// mock into everything that reconciles.
package providerlog

import (
	"net/http"
	"time"
)

// Usage holds token counts as the provider's wire format reported them. For OpenAI
// endpoints InputTokens includes CacheReadInputTokens (prompt_tokens is inclusive); for
// Anthropic it excludes both cache counts. OutputTokens always includes ReasoningTokens.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	ReasoningTokens          int64 `json:"reasoning_tokens"`
}

// Record is a provider's own account of one request, kept independently of the
// gateway so its metering can be checked against it.
type Record struct {
	ID       string    `json:"id"` // the response id the provider sent (msg_..., chatcmpl-..., resp_...); empty on errors
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	RawPath  string    `json:"raw_path"`
	RawQuery string    `json:"raw_query"`
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	// Usage is the last usage the client was sent; for a cut Anthropic stream that can be
	// the partial count from message_start. Zero if none was sent.
	Usage Usage `json:"usage"`
	// UsageReported says the final usage reached the client: false on errors, with
	// the mock's X-Mock-Omit-Usage, and when a stream ended before its usage event.
	UsageReported bool `json:"usage_reported"`
	Status        int  `json:"status"` // 0 if the client left before any response
	// Disconnected says the stream was cut on purpose or the client went away.
	Disconnected bool `json:"disconnected"`
	// AuthHeader and APIKeyHeader are the raw Authorization and x-api-key values received,
	// so tests can assert which credential the gateway injected.
	AuthHeader   string      `json:"auth_header"`
	APIKeyHeader string      `json:"api_key_header"`
	Headers      http.Header `json:"headers"`
	BodyBytes    int         `json:"body_bytes"`
	// Body is the request body as sent, for tests that check what the gateway
	// forwarded (the mock only; never written to the provider log).
	Body []byte `json:"-"`
}
