package estimate_test

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/proxy/estimate"
)

// sonnet is claude-sonnet-4-5 as seeded: $3/$15, cache $3.75 (5m) $6 (1h) $0.30,
// doubled input and 1.5x output past 200k prompt tokens.
var sonnet = estimate.Price{
	Model: "claude-sonnet-4-5", InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000,
	CacheWritePerMTok: 3_750_000, CacheWrite1hPerMTok: 6_000_000, CacheReadPerMTok: 300_000,
	MaxOutputTokens: 64_000, TierThreshold: 200_000,
	TierInputPerMTok: 6_000_000, TierOutputPerMTok: 22_500_000, TierCacheWritePerMTok: 7_500_000,
	TierCacheWrite1hPerMTok: 12_000_000, TierCacheReadPerMTok: 600_000,
}

var mini = estimate.Price{Model: "gpt-4o-mini", InputPerMTok: 150_000, OutputPerMTok: 600_000,
	CacheWritePerMTok: 150_000, CacheReadPerMTok: 75_000, MaxOutputTokens: 16_384}

// The rounding rule: ceil(Σ tokens × rate / 1e6), once per request.
func TestCostRoundsUpOncePerRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		price estimate.Price
		usage estimate.Usage
		want  int64
	}{
		{"nothing used costs nothing", mini, estimate.Usage{}, 0},
		{"exact: 100k input at $3", sonnet, estimate.Usage{InputTokens: 100_000}, 300_000},
		{"exact: 1 input token at $3 is 3 micros", sonnet, estimate.Usage{InputTokens: 1}, 3},
		{"exact: 1000 output at $15 is 15000 micros", sonnet, estimate.Usage{OutputTokens: 1000}, 15_000},
		{"inexact: 1 cached token at $0.075 rounds up to 1", mini, estimate.Usage{CacheReadTokens: 1}, 1},
		{"inexact: 10 input at $0.15 is 1.5, rounds to 2", mini, estimate.Usage{InputTokens: 10}, 2},
		{"rounded once, not per class: 0.15 + 0.6 = 0.75 -> 1, not 2", mini, estimate.Usage{InputTokens: 1, OutputTokens: 1}, 1},
		{"just above a whole micro: 6_666_667 x 0.15 = 1_000_000.05 -> 1_000_001", mini, estimate.Usage{InputTokens: 6_666_667}, 1_000_001},
		{"just below: 6_666_666 x 0.15 = 999_999.9 -> 1_000_000", mini, estimate.Usage{InputTokens: 6_666_666}, 1_000_000},
		{"every class", sonnet, estimate.Usage{InputTokens: 1000, CacheWriteTokens: 2000, CacheWrite1hTokens: 3000, CacheReadTokens: 4000, OutputTokens: 500},
			3000 + 7500 + 18000 + 1200 + 7500},
		{"negative counts count as zero", sonnet, estimate.Usage{InputTokens: -5, OutputTokens: 1000}, 15_000},
	}
	for _, tt := range tests {
		if got := tt.price.Cost(tt.usage); got != tt.want {
			t.Errorf("%s: Cost(%+v) = %d, want %d", tt.name, tt.usage, got, tt.want)
		}
	}
}

func TestCostTierReachedByWholePrompt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		usage estimate.Usage
		want  int64
	}{
		{"exactly at the threshold: base rates",
			estimate.Usage{InputTokens: 200_000, OutputTokens: 1000}, 600_000 + 15_000},
		{"one past: every token at the tier, output included",
			estimate.Usage{InputTokens: 200_001, OutputTokens: 1000}, 1_200_006 + 22_500},
		{"cached and cache-written tokens count toward the threshold and pay the tier",
			estimate.Usage{InputTokens: 1, CacheWriteTokens: 100_000, CacheReadTokens: 100_000, OutputTokens: 1000},
			6 + 750_000 + 60_000 + 22_500},
		{"1h cache writes too",
			estimate.Usage{CacheWrite1hTokens: 200_001}, 2_400_012},
	}
	for _, tt := range tests {
		if got := sonnet.Cost(tt.usage); got != tt.want {
			t.Errorf("%s: Cost = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestCostFallbackRates(t *testing.T) {
	t.Parallel()
	p := estimate.Price{Model: "m", InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000, CacheWritePerMTok: 1_250_000,
		MaxOutputTokens: 10, TierThreshold: 100, TierInputPerMTok: 2_000_000}
	// No 1h rate: 1h writes pay the 5m rate, never less. No tier output or cache
	// rates: the base ones.
	if got, want := p.Cost(estimate.Usage{CacheWrite1hTokens: 1_000_000}), int64(1_250_000); got != want {
		t.Errorf("1h writes without a 1h rate: Cost = %d, want %d", got, want)
	}
	if got, want := p.Cost(estimate.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}), int64(2_000_000+2_000_000); got != want {
		t.Errorf("tier without a tier output rate: Cost = %d, want %d", got, want)
	}
}

// bigCost is the rounding rule in math/big, as the reference.
func bigCost(counts, rates []int64) *big.Int {
	s := new(big.Int)
	for i := range counts {
		s.Add(s, new(big.Int).Mul(big.NewInt(max(counts[i], 0)), big.NewInt(max(rates[i], 0))))
	}
	q, r := new(big.Int).QuoRem(s, big.NewInt(1_000_000), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func TestCostNeverOverflows(t *testing.T) {
	t.Parallel()
	const tok, rate = 1_000_000_000_000, 1_000_000_000_000
	huge := estimate.Price{Model: "huge", InputPerMTok: rate, OutputPerMTok: rate, CacheWritePerMTok: rate,
		CacheWrite1hPerMTok: rate, CacheReadPerMTok: rate, MaxOutputTokens: 1}
	u := estimate.Usage{InputTokens: tok, CacheWriteTokens: tok, CacheWrite1hTokens: tok, CacheReadTokens: tok, OutputTokens: tok}
	want := bigCost([]int64{tok, tok, tok, tok, tok}, []int64{rate, rate, rate, rate, rate})
	if got := huge.Cost(u); !want.IsInt64() || got != want.Int64() {
		t.Errorf("5 x 1e12 tokens at 1e12: Cost = %d, want %s", got, want)
	}
	maxed := estimate.Price{Model: "max", InputPerMTok: math.MaxInt64, OutputPerMTok: math.MaxInt64, CacheWritePerMTok: math.MaxInt64,
		CacheWrite1hPerMTok: math.MaxInt64, CacheReadPerMTok: math.MaxInt64, MaxOutputTokens: 1}
	all := estimate.Usage{InputTokens: math.MaxInt64, CacheWriteTokens: math.MaxInt64, CacheWrite1hTokens: math.MaxInt64,
		CacheReadTokens: math.MaxInt64, OutputTokens: math.MaxInt64}
	if got := maxed.Cost(all); got != math.MaxInt64 {
		t.Errorf("MaxInt64 everywhere: Cost = %d, want it saturated at MaxInt64", got)
	}
	if got := maxed.Hold(math.MaxInt64, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("MaxInt64 everywhere: Hold = %d, want it saturated at MaxInt64", got)
	}

	// Random values against math/big, across the 64-bit range of products.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		pick := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return rng.Int64N(1_000_000)
			case 1:
				return rng.Int64N(1_000_000_000_000 + 1)
			case 2:
				return rng.Int64N(math.MaxInt64/8) + 1
			}
			return 0
		}
		c := []int64{pick(), pick(), pick(), pick(), pick()}
		r := []int64{pick(), pick(), pick(), pick(), pick()}
		p := estimate.Price{Model: "r", InputPerMTok: r[0], CacheWritePerMTok: r[1], CacheWrite1hPerMTok: max(r[2], r[1]),
			CacheReadPerMTok: r[3], OutputPerMTok: r[4], MaxOutputTokens: 1}
		u := estimate.Usage{InputTokens: c[0], CacheWriteTokens: c[1], CacheWrite1hTokens: c[2], CacheReadTokens: c[3], OutputTokens: c[4]}
		want := bigCost(c, []int64{r[0], r[1], max(r[2], r[1]), r[3], r[4]})
		got := p.Cost(u)
		if want.IsInt64() && got != want.Int64() || !want.IsInt64() && got != math.MaxInt64 {
			t.Fatalf("Cost(%v at %v) = %d, want %s (saturated at MaxInt64)", c, r, got, want)
		}
	}
}

func TestHold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		price         estimate.Price
		input, output int64
		want          int64
	}{
		{"input at the highest input-class rate (1h cache write $6), output at $15",
			sonnet, 1000, 1000, 6000 + 15_000},
		{"estimate x 2.25 at the threshold: base rates",
			sonnet, 88_888, 0, 533_328},
		{"estimate x 2.25 past the threshold: tier rates (1h write $12, output $22.50)",
			sonnet, 88_889, 1000, 1_066_668 + 22_500},
		{"no input estimate still holds one token",
			mini, 0, 0, 1},
		{"rounded up: 1 token at $0.15",
			mini, 1, 0, 1},
		{"a model without cache-write rates holds input at the input rate",
			mini, 1_000_000, 1_000_000, 150_000 + 600_000},
	}
	for _, tt := range tests {
		if got := tt.price.Hold(tt.input, tt.output); got != tt.want {
			t.Errorf("%s: Hold(%d, %d) = %d, want %d", tt.name, tt.input, tt.output, got, tt.want)
		}
	}
	// The hold covers the cost of any usage that fits the estimate and ceiling.
	for _, u := range []estimate.Usage{
		{InputTokens: 88_889, OutputTokens: 1000},
		{CacheWrite1hTokens: 88_889, OutputTokens: 1000},
		{InputTokens: 44_000, CacheReadTokens: 44_889, OutputTokens: 1000},
	} {
		if hold, cost := sonnet.Hold(88_889, 1000), sonnet.Cost(u); cost > hold {
			t.Errorf("usage %+v costs %d, more than the hold %d", u, cost, hold)
		}
	}
}

func TestHoldNeverZeroForPricedModel(t *testing.T) {
	t.Parallel()
	for _, p := range []estimate.Price{
		{Model: "in-only", InputPerMTok: 1, MaxOutputTokens: 1},
		{Model: "out-only", OutputPerMTok: 1, MaxOutputTokens: 1},
		{Model: "embed", InputPerMTok: 20_000, MaxOutputTokens: 1},
	} {
		if h := p.Hold(1, 0); h < 1 {
			t.Errorf("%s: Hold(1, 0) = %d, want at least 1", p.Model, h)
		}
	}
}

func TestHoldFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  estimate.Request
		want int64
	}{
		{"no ceiling: held at the model maximum", estimate.Request{Kind: estimate.AnthropicMessages, InputTokens: 1000},
			6000 + 64_000*15},
		{"the body's ceiling", estimate.Request{Kind: estimate.AnthropicMessages, InputTokens: 1000, MaxOutputTokens: 100, MaxOutputField: "max_tokens"},
			6000 + 1500},
		{"n completions hold n ceilings", estimate.Request{Kind: estimate.OpenAIChat, InputTokens: 1000, MaxOutputTokens: 100, Choices: 3},
			6000 + 4500},
		{"embeddings have no output", estimate.Request{Kind: estimate.OpenAIEmbeddings, InputTokens: 1000},
			6000},
	}
	for _, tt := range tests {
		got, err := sonnet.HoldFor(tt.req)
		if err != nil || got != tt.want {
			t.Errorf("%s: HoldFor = %d, %v; want %d", tt.name, got, err, tt.want)
		}
	}
	_, err := sonnet.HoldFor(estimate.Request{Kind: estimate.OpenAIResponses, MaxOutputTokens: 64_001, MaxOutputField: "max_output_tokens"})
	if estimate.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), "max_output_tokens is 64001, above the maximum output of claude-sonnet-4-5 (64000 tokens)") {
		t.Errorf("ceiling above the model maximum: err = %v, want a 400 naming max_output_tokens and the maximum", err)
	}
	if err := sonnet.CheckMaxOutput(64_000); err != nil {
		t.Errorf("CheckMaxOutput(the maximum) = %v, want nil", err)
	}
	var be *estimate.BodyError
	if err := sonnet.CheckMaxOutput(64_001); !errors.As(err, &be) || be.Field != "max_tokens" {
		t.Errorf("CheckMaxOutput(max+1) = %v, want a *BodyError for max_tokens", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := sonnet.Validate(); err != nil {
		t.Fatalf("seeded sonnet: %v", err)
	}
	with := func(f func(p *estimate.Price)) estimate.Price {
		p := sonnet
		f(&p)
		return p
	}
	tests := []struct {
		name  string
		price estimate.Price
		field string
	}{
		{"no model", with(func(p *estimate.Price) { p.Model = "" }), "model"},
		{"negative rate", with(func(p *estimate.Price) { p.CacheReadPerMTok = -1 }), "cache_read"},
		{"absurd rate", with(func(p *estimate.Price) { p.OutputPerMTok = estimate.MaxRatePerMTok + 1 }), "output"},
		{"free", with(func(p *estimate.Price) { p.InputPerMTok, p.OutputPerMTok = 0, 0 }), "input"},
		{"no max output", with(func(p *estimate.Price) { p.MaxOutputTokens = 0 }), "max_output_tokens"},
		{"negative threshold", with(func(p *estimate.Price) { p.TierThreshold = -1 }), "tier_threshold"},
		{"tier rate without threshold", with(func(p *estimate.Price) { p.TierThreshold = 0 }), "tier_input"},
		{"threshold without tier rates", with(func(p *estimate.Price) { p.TierInputPerMTok, p.TierOutputPerMTok = 0, 0 }), "tier_input"},
		{"tier cheaper than base", with(func(p *estimate.Price) { p.TierCacheReadPerMTok = 1 }), "tier_cache_read"},
	}
	for _, tt := range tests {
		var pe *estimate.PriceError
		if err := tt.price.Validate(); !errors.As(err, &pe) || pe.Field != tt.field {
			t.Errorf("%s: Validate() = %v, want a *PriceError for %s", tt.name, err, tt.field)
		}
	}
}

func TestLookupNamesKnownModels(t *testing.T) {
	t.Parallel()
	table := estimate.Table{"gpt-4o-mini": mini, "claude-sonnet-4-5": sonnet}
	if p, err := table.Lookup("gpt-4o-mini"); err != nil || p != mini {
		t.Errorf("Lookup(gpt-4o-mini) = %+v, %v", p, err)
	}
	_, err := table.Lookup("gpt-4o-mini-2024-07-18")
	if !errors.Is(err, estimate.ErrUnknownModel) ||
		err.Error() != `model "gpt-4o-mini-2024-07-18" has no price on this gateway; known models: claude-sonnet-4-5, gpt-4o-mini` {
		t.Errorf("unknown model: err = %v", err)
	}
}
