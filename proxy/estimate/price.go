// Package estimate prices LLM requests in integer micro-dollars: the worst-case
// hold placed before a request is forwarded (Hold, HoldFor) and the exact cost of
// the usage the provider reports (Cost). It also reads, strictly, the few request
// fields a hold depends on (Parse) and inflates compressed bodies for that reading
// only (Decode). It never sees a float: every amount is an int64 of micro-dollars
// and every rate an int64 of micro-dollars per million tokens.
//
// The rounding rule, written down once: a request's cost is
//
//	ceil( Σ tokens_class × rate_class / 1,000,000 )
//
// summed over the token classes exactly (128-bit), then rounded UP once, per
// request, to the next whole micro-dollar. A request that used any priced token
// therefore never costs $0, and the sum of many requests never loses a fraction
// to rounding in the gateway's favour of the member.
package estimate

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// MaxRatePerMTok is the highest rate a Price may carry: $1,000,000 per million
// tokens. It keeps every hold for a body and output ceiling the gateway accepts far
// below 2^53, so the admission script's Lua numbers stay exact.
const MaxRatePerMTok = 1_000_000_000_000

// Price is one model's list price. Rates are micro-dollars per million tokens
// (MTok): $3 per MTok is 3_000_000.
//
// Some models cost more once the prompt (uncached input + cache writes + cache
// reads) passes TierThreshold tokens; then the Tier* rates apply to every token of
// the request, not only to those past the threshold (Anthropic's and OpenAI's
// long-context rule). A Tier* rate of 0, or below its base rate, means the base
// rate: a tier never makes a class cheaper.
type Price struct {
	Model string

	InputPerMTok      int64 // uncached input
	OutputPerMTok     int64 // output, reasoning tokens included
	CacheWritePerMTok int64 // cache writes at the default (5-minute) lifetime
	// CacheWrite1hPerMTok is Anthropic's 1-hour cache write; 0, or below
	// CacheWritePerMTok, means CacheWritePerMTok.
	CacheWrite1hPerMTok int64
	CacheReadPerMTok    int64

	MaxOutputTokens int64 // the model's largest output; the hold when a request sets none

	TierThreshold           int64 // 0: no tier; else prompt tokens above which the Tier* rates apply
	TierInputPerMTok        int64
	TierOutputPerMTok       int64
	TierCacheWritePerMTok   int64
	TierCacheWrite1hPerMTok int64
	TierCacheReadPerMTok    int64
}

// Usage is what a provider reports for one request, by token class. Classes do not
// overlap: InputTokens excludes cached and cache-written tokens (convert OpenAI's
// inclusive prompt_tokens by subtracting cached_tokens), CacheWriteTokens excludes
// CacheWrite1hTokens (Anthropic's cache_creation.ephemeral_1h_input_tokens), and
// OutputTokens includes reasoning tokens, as both providers bill them.
type Usage struct {
	InputTokens        int64
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	CacheReadTokens    int64
	OutputTokens       int64
}

// PromptTokens is every input token of u, the count a tier threshold is compared with.
func (u Usage) PromptTokens() int64 {
	return satAdd(satAdd(nonNeg(u.InputTokens), nonNeg(u.CacheWriteTokens)),
		satAdd(nonNeg(u.CacheWrite1hTokens), nonNeg(u.CacheReadTokens)))
}

// rates is one tier's per-class rates, with the fallbacks applied.
type rates struct{ input, output, cacheWrite, cacheWrite1h, cacheRead uint64 }

func (p Price) rates(tier bool) rates {
	r := rates{input: rate(p.InputPerMTok), output: rate(p.OutputPerMTok), cacheWrite: rate(p.CacheWritePerMTok),
		cacheRead: rate(p.CacheReadPerMTok)}
	r.cacheWrite1h = max(rate(p.CacheWrite1hPerMTok), r.cacheWrite)
	if tier {
		r.input = max(r.input, rate(p.TierInputPerMTok))
		r.output = max(r.output, rate(p.TierOutputPerMTok))
		r.cacheWrite = max(r.cacheWrite, rate(p.TierCacheWritePerMTok))
		r.cacheWrite1h = max(r.cacheWrite1h, rate(p.TierCacheWrite1hPerMTok), r.cacheWrite)
		r.cacheRead = max(r.cacheRead, rate(p.TierCacheReadPerMTok))
	}
	return r
}

func (r rates) zero() bool { return r == rates{} }

// tier reports whether prompt tokens reach the tier rates.
func (p Price) tier(prompt int64) bool { return p.TierThreshold > 0 && prompt > p.TierThreshold }

// Cost is the exact cost of u in micro-dollars at the tier u actually reached,
// rounded up once to the next whole micro (see the package comment). Negative
// counts count as 0; a cost past math.MaxInt64 (unreachable with real prices)
// saturates there rather than wrapping.
func (p Price) Cost(u Usage) int64 {
	r := p.rates(p.tier(u.PromptTokens()))
	var s sum
	s.add(u.InputTokens, r.input)
	s.add(u.CacheWriteTokens, r.cacheWrite)
	s.add(u.CacheWrite1hTokens, r.cacheWrite1h)
	s.add(u.CacheReadTokens, r.cacheRead)
	s.add(u.OutputTokens, r.output)
	return s.micros()
}

// TierMargin is how far a real prompt may exceed the input estimate before Hold
// stops trusting the estimate to stay under a tier threshold: the densest content
// measured (random base64: 1.40 body bytes per token, see EstimateInputTokens) is
// 3/1.40 = 2.14 times the estimate, so Hold assumes up to 2.25 times.
const (
	tierMarginNum = 9
	tierMarginDen = 4
)

// Hold is the most a request can cost, in micro-dollars, before its response is
// seen: inputEstimate input tokens plus maxOutput output tokens, rounded up. It
// prices at the tier rates whenever the estimate, times a margin for
// under-estimation (2.25), passes the tier threshold, and it prices every input
// token at the highest input-class rate (input, cache write, 1-hour cache write),
// because any of them may turn out to be a cache write. An inputEstimate below 1
// counts as 1, so a model with any non-zero rate is never held at $0.
func (p Price) Hold(inputEstimate, maxOutput int64) int64 {
	in := max(inputEstimate, 1)
	reach := satAdd(satMul(in, tierMarginNum), tierMarginDen-1) / tierMarginDen // rounded up
	r := p.rates(p.tier(reach))
	var s sum
	s.add(in, max(r.input, r.cacheWrite, r.cacheWrite1h))
	s.add(maxOutput, r.output)
	if h := s.micros(); h > 0 || r.zero() {
		return h
	}
	return 1
}

// HoldFor is Hold for a parsed request: its input estimate, and its output ceiling
// (the model's maximum when the body sets none; none at all for embeddings) times
// the completions it asks for. It refuses a ceiling above the model's maximum.
func (p Price) HoldFor(r Request) (int64, error) {
	if err := p.checkMaxOutput(r.MaxOutputField, r.MaxOutputTokens); err != nil {
		return 0, err
	}
	out := r.MaxOutputTokens
	if out == 0 {
		out = p.MaxOutputTokens
	}
	if r.Kind == OpenAIEmbeddings {
		out = 0
	}
	return p.Hold(r.InputTokens, satMul(out, max(r.Choices, 1))), nil
}

// CheckMaxOutput refuses an output ceiling above the model's maximum, as a
// *BodyError that wraps ErrInvalid (400). 0 means none was set and passes.
func (p Price) CheckMaxOutput(n int64) error { return p.checkMaxOutput("max_tokens", n) }

func (p Price) checkMaxOutput(field string, n int64) error {
	if field == "" {
		field = "max_tokens"
	}
	if n < 0 {
		return invalidField(field, "%s must be a positive integer, got %d", field, n)
	}
	if p.MaxOutputTokens > 0 && n > p.MaxOutputTokens {
		return invalidField(field, "%s is %d, above the maximum output of %s (%d tokens)", field, n, p.Model, p.MaxOutputTokens)
	}
	return nil
}

// PriceError is a Price that Validate refuses, named by field.
type PriceError struct {
	Field   string // input, output, cache_write, cache_write_1h, cache_read, max_output_tokens, tier_*
	Message string
}

func (e *PriceError) Error() string { return e.Field + ": " + e.Message }

// Validate checks what SetPrice stores: no negative or absurd rate, a positive
// maximum output, a non-zero price (the gateway never holds $0), and tier fields
// that are all set or all unset, never below their base rates.
func (p Price) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PriceError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	if p.Model == "" {
		return bad("model", "a price needs a model name")
	}
	base := []struct {
		field     string
		v, tier   int64
		tierField string
	}{
		{"input", p.InputPerMTok, p.TierInputPerMTok, "tier_input"},
		{"output", p.OutputPerMTok, p.TierOutputPerMTok, "tier_output"},
		{"cache_write", p.CacheWritePerMTok, p.TierCacheWritePerMTok, "tier_cache_write"},
		{"cache_write_1h", p.CacheWrite1hPerMTok, p.TierCacheWrite1hPerMTok, "tier_cache_write_1h"},
		{"cache_read", p.CacheReadPerMTok, p.TierCacheReadPerMTok, "tier_cache_read"},
	}
	for _, b := range base {
		for _, f := range []struct {
			name string
			v    int64
		}{{b.field, b.v}, {b.tierField, b.tier}} {
			if f.v < 0 || f.v > MaxRatePerMTok {
				return bad(f.name, "rate must be from 0 to %d micro-dollars per million tokens, got %d", int64(MaxRatePerMTok), f.v)
			}
		}
	}
	if p.InputPerMTok == 0 && p.OutputPerMTok == 0 {
		return bad("input", "input and output are both $0: the gateway never holds or charges $0 for a paid model")
	}
	if p.MaxOutputTokens <= 0 || p.MaxOutputTokens > MaxOutputCeiling {
		return bad("max_output_tokens", "maximum output must be from 1 to %d tokens, got %d", int64(MaxOutputCeiling), p.MaxOutputTokens)
	}
	if p.TierThreshold < 0 {
		return bad("tier_threshold", "tier threshold must be 0 (no tier) or a positive token count, got %d", p.TierThreshold)
	}
	if p.TierThreshold == 0 {
		for _, b := range base {
			if b.tier != 0 {
				return bad(b.tierField, "a tier rate needs a tier threshold")
			}
		}
		return nil
	}
	if p.TierInputPerMTok == 0 && p.TierOutputPerMTok == 0 {
		return bad("tier_input", "a tier threshold needs tier rates (at least tier input or tier output)")
	}
	for _, b := range base {
		if b.tier != 0 && b.tier < b.v {
			return bad(b.tierField, "tier rate %d is below the base rate %d; a tier never makes a class cheaper", b.tier, b.v)
		}
	}
	return nil
}

// Table is every known model's price, by exact model name.
type Table map[string]Price

// ErrUnknownModel is what Lookup's error wraps: the model has no price.
var ErrUnknownModel = errors.New("unknown model")

// UnknownModelError names a model without a price and the models that have one.
type UnknownModelError struct {
	Model string
	Known []string // sorted
}

func (e *UnknownModelError) Error() string {
	const show = 40
	list := strings.Join(e.Known[:min(len(e.Known), show)], ", ")
	if len(e.Known) > show {
		list += fmt.Sprintf(" and %d more", len(e.Known)-show)
	}
	if list == "" {
		list = "none: set one with tollgate admin set-price"
	}
	return fmt.Sprintf("model %q has no price on this gateway; known models: %s", e.Model, list)
}

func (e *UnknownModelError) Unwrap() error { return ErrUnknownModel }

// Lookup returns model's price, or an *UnknownModelError.
func (t Table) Lookup(model string) (Price, error) {
	if p, ok := t[model]; ok {
		return p, nil
	}
	known := make([]string, 0, len(t))
	for m := range t {
		known = append(known, m)
	}
	slices.Sort(known)
	return Price{}, &UnknownModelError{Model: model, Known: known}
}

// sum is an exact 128-bit sum of tokens × rate products.
type sum struct {
	hi, lo   uint64
	overflow bool
}

func (s *sum) add(tokens int64, r uint64) {
	if tokens <= 0 || r == 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(tokens), r)
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, lo, 0)
	s.hi, carry = bits.Add64(s.hi, hi, carry)
	if carry != 0 {
		s.overflow = true
	}
}

// micros is ceil(sum / 1e6), saturated at math.MaxInt64.
func (s *sum) micros() int64 {
	const perMTok = 1_000_000
	if s.overflow || s.hi >= perMTok { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, rem := bits.Div64(s.hi, s.lo, perMTok)
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func rate(v int64) uint64 { return uint64(nonNeg(v)) }

func nonNeg(v int64) int64 { return max(v, 0) }

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// satMul multiplies non-negative a and b, saturating at math.MaxInt64.
func satMul(a, b int64) int64 {
	a, b = nonNeg(a), nonNeg(b)
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
