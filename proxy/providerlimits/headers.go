// Package providerlimits learns a provider account's own rate limits from the
// upstream's answers (the anthropic-ratelimit-* and x-ratelimit-* headers, and
// 429s), so the gateway stops sending requests into a known 429: it paces them
// to the account's rate, waits a bounded time, or answers the 429 itself.
//
// The headers are untrusted input: a value that does not parse, or says
// something absurd, is ignored, and nothing learned holds traffic for longer
// than Options.MaxHold.
package providerlimits

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Window is one limit the provider reported: how many it allows, how many are
// left, and when it is fully replenished.
type Window struct {
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"` // zero when not reported
}

// Known says the provider reported this limit.
func (w Window) Known() bool { return w.Limit > 0 }

// Observation is what one response said about the account's limits.
type Observation struct {
	Requests     Window `json:"requests"`
	Tokens       Window `json:"tokens"`
	InputTokens  Window `json:"input_tokens"`  // Anthropic only
	OutputTokens Window `json:"output_tokens"` // Anthropic only
	// RetryAfter is how long the provider asked the caller to wait; 0 if it did not.
	RetryAfter time.Duration `json:"retry_after"`
}

// Bounds beyond which a header is absurd and ignored. No provider limit is
// counted in the trillions, and every window they document is a minute or a
// day; a reset or retry more than a day away is not one the gateway acts on.
const (
	maxCount      = 1_000_000_000_000
	maxReset      = 24 * time.Hour
	maxValueBytes = 64
)

// Parse reads both providers' rate-limit headers from h, received at now.
// Anthropic sends anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
// with RFC 3339 resets; OpenAI sends x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// with Go-style durations ("1s", "6m0s", "20ms"). Both send retry-after on a
// 429, OpenAI also retry-after-ms. A window with any malformed part is left out.
func Parse(h http.Header, now time.Time) Observation {
	var o Observation
	anthropic := func(n *windowHeaders) Window {
		return window(h.Get(n.limit), h.Get(n.remaining), h.Get(n.reset), func(v string) (time.Time, bool) {
			t, err := time.Parse(time.RFC3339, v)
			return t, err == nil
		}, now)
	}
	openAI := func(n *windowHeaders) Window {
		return window(h.Get(n.limit), h.Get(n.remaining), h.Get(n.reset), func(v string) (time.Time, bool) {
			d, err := time.ParseDuration(v)
			return now.Add(d), err == nil && d >= 0
		}, now)
	}
	o.Requests, o.Tokens = anthropic(&anthropicRequests), anthropic(&anthropicTokens)
	o.InputTokens, o.OutputTokens = anthropic(&anthropicInputTokens), anthropic(&anthropicOutputTokens)
	if !o.Requests.Known() {
		o.Requests = openAI(&openAIRequests)
	}
	if !o.Tokens.Known() {
		o.Tokens = openAI(&openAITokens)
	}
	o.RetryAfter = retryAfter(h, now)
	return o
}

// windowHeaders names one window's three headers, in canonical form: built
// once, not on every response.
type windowHeaders struct{ limit, remaining, reset string }

func anthropicHeaders(name string) windowHeaders {
	p := "Anthropic-Ratelimit-" + name + "-"
	return windowHeaders{p + "Limit", p + "Remaining", p + "Reset"}
}

func openAIHeaders(name string) windowHeaders {
	return windowHeaders{"X-Ratelimit-Limit-" + name, "X-Ratelimit-Remaining-" + name, "X-Ratelimit-Reset-" + name}
}

var (
	anthropicRequests     = anthropicHeaders("Requests")
	anthropicTokens       = anthropicHeaders("Tokens")
	anthropicInputTokens  = anthropicHeaders("Input-Tokens")
	anthropicOutputTokens = anthropicHeaders("Output-Tokens")
	openAIRequests        = openAIHeaders("Requests")
	openAITokens          = openAIHeaders("Tokens")
)

// window parses one limit; reset is optional, limit and remaining are not.
func window(limit, remaining, reset string, parseReset func(string) (time.Time, bool), now time.Time) Window {
	l, okL := count(limit)
	r, okR := count(remaining)
	if !okL || !okR || l == 0 || r > l {
		return Window{}
	}
	w := Window{Limit: l, Remaining: r}
	if reset = strings.TrimSpace(reset); reset != "" {
		t, ok := parseReset(reset)
		if !ok || len(reset) > maxValueBytes || t.Sub(now) > maxReset {
			return Window{}
		}
		// A reset already past (a clock apart, a slow answer) means now.
		if t.Before(now) {
			t = now
		}
		w.Reset = t
	}
	return w
}

func count(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > maxValueBytes {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 0 && n <= maxCount
}

// retryAfter reads retry-after-ms (milliseconds, maybe fractional), else
// retry-after (seconds, or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" && len(v) <= maxValueBytes {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms <= float64(maxReset/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" || len(v) > maxValueBytes {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s > 0 && s <= int64(maxReset/time.Second) {
			return time.Duration(s) * time.Second
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) && t.Sub(now) <= maxReset {
		return t.Sub(now)
	}
	return 0
}
