package proxy

import "github.com/tollgate/tollgate/proxy/usage"

// Reported usage is data, not truth (HOSTILE item 47): a route may point at any
// upstream, and a buggy or hostile one can report any count. Usage that the request
// cannot have had is not charged; the request is charged its hold instead.
const (
	// MaxReportedTokens is the most tokens of one class one request may report: 100
	// million, a hundred times the largest context window sold today. It keeps every
	// product and sum of counts far from overflow.
	MaxReportedTokens = 100_000_000

	// unbodiedInputTokens is the input a request may report beyond one token per byte
	// of its (inflated) body, a text token never being shorter than a byte: the
	// content a body only points at (images and PDFs by URL, uploaded files,
	// previous_response_id, server-tool loops that re-read their context).
	unbodiedInputTokens = 10_000_000

	// Output may pass the request's ceiling by outputSlackTokens plus 1/outputSlackDiv
	// of it: compatible servers count a stop token or a stop sequence past max_tokens.
	outputSlackTokens = 16
	outputSlackDiv    = 16
)

// Why reported usage is implausible, as reported in the security event.
const (
	implausibleNegative   = "negative_count"
	implausibleCeiling    = "count_past_ceiling"
	implausibleCacheSplit = "one_hour_cache_write_above_cache_write"
	implausibleNoInput    = "no_input_tokens"
	implausibleInput      = "input_above_body_bound"
	implausibleOutput     = "output_above_max_tokens"
	implausibleCost       = "cost_past_ceiling"
)

// implausible says why u cannot be what the request m metered used, or "" when it
// can. Every accepted request has input (the providers count at least the message
// framing), so no input at all is implausible; no output is not (a stop sequence
// or end of turn at once), and is charged as reported.
func (m meter) implausible(u usage.Usage) string {
	for _, n := range [...]int64{u.InputTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.CacheReadTokens,
		u.OutputTokens, u.ReasoningTokens} {
		switch {
		case n < 0:
			return implausibleNegative
		case n > MaxReportedTokens:
			return implausibleCeiling
		}
	}
	// From here every count is at most 10^8: no sum below can overflow.
	prompt := u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens
	switch {
	case u.CacheWrite1hTokens > u.CacheWriteTokens:
		return implausibleCacheSplit
	case prompt == 0:
		return implausibleNoInput
	case prompt > m.bodyBytes+unbodiedInputTokens:
		return implausibleInput
	case u.OutputTokens > m.maxOutput+m.maxOutput/outputSlackDiv+outputSlackTokens:
		return implausibleOutput
	case CostOf(m.price, u) > MaxRequestMicros:
		return implausibleCost
	}
	return ""
}

// bounded is u with every count in 0..MaxReportedTokens: what the ledger and the
// metrics record of usage that was not charged, so no sum over them overflows.
func bounded(u usage.Usage) usage.Usage {
	c := func(n int64) int64 { return min(max(n, 0), MaxReportedTokens) }
	return usage.Usage{InputTokens: c(u.InputTokens), CacheWriteTokens: c(u.CacheWriteTokens),
		CacheWrite1hTokens: c(u.CacheWrite1hTokens), CacheReadTokens: c(u.CacheReadTokens),
		OutputTokens: c(u.OutputTokens), ReasoningTokens: c(u.ReasoningTokens)}
}
