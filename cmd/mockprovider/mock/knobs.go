package mock

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// knobs are one request's settings: the Options, overridden by request headers.
type knobs struct {
	latency, interval time.Duration
	outputTokens      int64
	cacheRead         int64
	cacheWrite        int64
	reasoning         int64
	failStatus        int // 0 for a normal response
	disconnectAfter   int // events sent before a stream is cut; -1 never
	omitUsage         bool
}

// parseKnobs reads the X-Mock-* headers, all optional, all non-negative integers:
//
//	X-Mock-Latency-Ms               wait before the response headers
//	X-Mock-Event-Interval-Ms        wait between SSE events
//	X-Mock-Output-Tokens            completion length before the request's cap
//	X-Mock-Cache-Read-Tokens        prompt tokens reported as read from cache
//	X-Mock-Cache-Write-Tokens       prompt tokens reported as written to cache (Anthropic only)
//	X-Mock-Reasoning-Tokens         reasoning tokens, billed as output on top of the text
//	X-Mock-Fail-Status              answer with this 4xx/5xx status and a provider-shaped error
//	X-Mock-Disconnect-After-Events  cut a stream abruptly after this many events
//	X-Mock-Omit-Usage               1: report no usage at all ("usage": null, no usage event)
//
// A malformed value is a 400, so a typo in a test fails loudly instead of being ignored.
func parseKnobs(h http.Header, o Options) (knobs, error) {
	k := knobs{
		latency:         o.Latency,
		interval:        o.EventInterval,
		outputTokens:    int64(o.OutputTokens),
		disconnectAfter: -1,
	}
	var errs []error
	num := func(name string, set func(int64)) {
		v := h.Get(name)
		if v == "" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a non-negative integer", name, v))
			return
		}
		set(n)
	}
	num("X-Mock-Latency-Ms", func(n int64) { k.latency = time.Duration(n) * time.Millisecond })
	num("X-Mock-Event-Interval-Ms", func(n int64) { k.interval = time.Duration(n) * time.Millisecond })
	num("X-Mock-Output-Tokens", func(n int64) { k.outputTokens = n })
	num("X-Mock-Cache-Read-Tokens", func(n int64) { k.cacheRead = n })
	num("X-Mock-Cache-Write-Tokens", func(n int64) { k.cacheWrite = n })
	num("X-Mock-Reasoning-Tokens", func(n int64) { k.reasoning = n })
	num("X-Mock-Disconnect-After-Events", func(n int64) { k.disconnectAfter = int(n) })
	num("X-Mock-Fail-Status", func(n int64) {
		if n < 400 || n > 599 {
			errs = append(errs, fmt.Errorf("X-Mock-Fail-Status: %d is not a 4xx or 5xx status", n))
			return
		}
		k.failStatus = int(n)
	})
	num("X-Mock-Omit-Usage", func(n int64) { k.omitUsage = n == 1 })
	return k, errors.Join(errs...)
}
