package mock

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// account is the provider account's own rate limits, which every request
// shares whatever its key: token buckets of requests and tokens per minute,
// refilled continuously as the real providers do. Every answer then carries
// the provider's rate-limit headers, and a request past either limit gets 429
// with Retry-After.
type account struct {
	rpm, tpm         float64 // 0: that limit is off
	mu               sync.Mutex
	requests, tokens float64
	at               time.Time
}

func newAccount(rpm, tpm int) *account {
	if rpm <= 0 && tpm <= 0 {
		return nil
	}
	return &account{rpm: float64(rpm), tpm: float64(tpm), requests: float64(rpm), tokens: float64(tpm), at: time.Now()}
}

// admit takes one request costing tokens from the account, sets the
// rate-limit headers on h in p's shape, and says how long to wait when the
// account has no room (0: admitted).
func (a *account) admit(h http.Header, p provider, tokens int64) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	elapsed := now.Sub(a.at).Minutes()
	a.at = now
	a.requests = math.Min(a.rpm, a.requests+a.rpm*elapsed)
	a.tokens = math.Min(a.tpm, a.tokens+a.tpm*elapsed)
	var wait time.Duration
	switch {
	case a.rpm > 0 && a.requests < 1:
		wait = untilFull(1-a.requests, a.rpm)
	case a.tpm > 0 && a.tokens <= 0:
		wait = untilFull(1-a.tokens, a.tpm)
	default:
		a.requests--
		a.tokens -= float64(tokens)
	}
	a.headers(h, p, now, "requests", a.rpm, a.requests)
	a.headers(h, p, now, "tokens", a.tpm, a.tokens)
	if wait > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		if p == openAI {
			h.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds()+1, 10))
		}
	}
	return wait
}

// untilFull is how long a bucket refilled at perMinute takes to gain n.
func untilFull(n, perMinute float64) time.Duration {
	return time.Duration(n / perMinute * float64(time.Minute))
}

// headers writes one limit the way its provider does: Anthropic with the time
// the bucket is full again (RFC 3339), OpenAI with the time until then.
func (a *account) headers(h http.Header, p provider, now time.Time, kind string, limit, left float64) {
	if limit <= 0 {
		return
	}
	remaining := strconv.FormatInt(int64(math.Max(0, math.Floor(left))), 10)
	full := untilFull(limit-math.Max(left, 0), limit)
	l := strconv.FormatInt(int64(limit), 10)
	if p == anthropic {
		prefix := "Anthropic-Ratelimit-" + map[string]string{"requests": "Requests", "tokens": "Tokens"}[kind] + "-"
		h.Set(prefix+"Limit", l)
		h.Set(prefix+"Remaining", remaining)
		h.Set(prefix+"Reset", now.Add(full).UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
		return
	}
	h.Set("X-Ratelimit-Limit-"+kind, l)
	h.Set("X-Ratelimit-Remaining-"+kind, remaining)
	h.Set("X-Ratelimit-Reset-"+kind, full.Round(time.Millisecond).String())
}
