package proxy

import (
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/proxy/estimate"
	"github.com/tollgate/tollgate/proxy/usage"
)

// TestOutcomeJudgesReportedUsage (HOSTILE item 47): the charge for a response whose
// usage the request cannot have had is the hold, marked implausible; a provider
// error is released whatever usage it carries; plausible usage is charged exactly.
func TestOutcomeJudgesReportedUsage(t *testing.T) {
	t.Parallel()
	// $3 / $15 per million, a 64,000-token model maximum; the request asked for 32
	// output tokens in a 100-byte body and was held 1,000 micro-dollars.
	price := estimate.Price{Model: "m", InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000, CacheWritePerMTok: 3_750_000,
		CacheReadPerMTok: 300_000, MaxOutputTokens: 64_000}
	m := meter{kind: usage.AnthropicMessages, paid: true, priced: true, price: price, model: "m", hold: 1000, tokens: 66,
		maxOutput: 32, bodyBytes: 100}
	anthropic := func(counts string) string { return `{"type":"message","usage":{` + counts + `}}` }
	cases := []struct {
		name   string
		status int
		body   string
		want   LedgerStatus
		cost   int64
		reason string
	}{
		{"Plausible", 200, anthropic(`"input_tokens":3,"output_tokens":32`), LedgerSettled, 489, ""},
		{"NoOutputIsPlausible", 200, anthropic(`"input_tokens":3,"output_tokens":0`), LedgerSettled, 9, ""},
		{"OutputWithinSlack", 200, anthropic(`"input_tokens":3,"output_tokens":50`), LedgerSettled, 759, ""},
		{"InputFromOutsideTheBody", 200, anthropic(`"input_tokens":3,"cache_read_input_tokens":2000000,"output_tokens":1`), LedgerSettled, 600024, ""},
		{"OutputPastMaxTokens", 200, anthropic(`"input_tokens":3,"output_tokens":10000000`), LedgerImplausible, 1000, implausibleOutput},
		{"OutputJustPastSlack", 200, anthropic(`"input_tokens":3,"output_tokens":51`), LedgerImplausible, 1000, implausibleOutput},
		{"InputPastBodyBound", 200, anthropic(`"input_tokens":10000101,"output_tokens":1`), LedgerImplausible, 1000, implausibleInput},
		{"Trillions", 200, anthropic(`"input_tokens":9000000000000,"output_tokens":1`), LedgerImplausible, 1000, implausibleCeiling},
		{"MaxInt64", 200, anthropic(`"input_tokens":3,"output_tokens":` + strconv.FormatInt(math.MaxInt64, 10)), LedgerImplausible, 1000, implausibleCeiling},
		{"Negative", 200, anthropic(`"input_tokens":-3,"output_tokens":11`), LedgerImplausible, 1000, implausibleNegative},
		{"NegativeCache", 200, anthropic(`"input_tokens":3,"cache_read_input_tokens":-1000,"output_tokens":11`), LedgerImplausible, 1000, implausibleNegative},
		{"OneHourAboveCacheWrite", 200, anthropic(`"input_tokens":3,"cache_creation_input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":5},"output_tokens":1`), LedgerImplausible, 1000, implausibleCacheSplit},
		{"ZeroAndZero", 200, anthropic(`"input_tokens":0,"output_tokens":0`), LedgerImplausible, 1000, implausibleNoInput},
		{"ErrorWithUsageReleased", 400, `{"type":"error","error":{"type":"invalid_request_error"},"usage":{"input_tokens":100000,"output_tokens":100000}}`, LedgerReleased, 0, ""},
		{"OverloadedWithUsageReleased", 529, `{"type":"error","error":{"type":"overloaded_error"},"usage":{"input_tokens":3,"output_tokens":32}}`, LedgerReleased, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tap := usage.NewTap(m.kind, "application/json", io.NopCloser(strings.NewReader(c.body)))
			if _, err := io.Copy(io.Discard, tap); err != nil {
				t.Fatal(err)
			}
			tg := &target{meter: m, tap: tap, status: c.status}
			tg.sent.Store(true)
			status, cost, tokens, used := tg.outcome()
			if status != c.want || cost != c.cost {
				t.Fatalf("%s at %d µ$, want %s at %d µ$", status, cost, c.want, c.cost)
			}
			reported, _, _ := tap.Result()
			if got := m.implausible(reported); c.status < 400 && got != c.reason {
				t.Fatalf("judged %q, want %q", got, c.reason)
			}
			if status == LedgerImplausible && tokens != m.tokens {
				t.Fatalf("reserved %d tokens, want the admission's %d", tokens, m.tokens)
			}
			for _, n := range []int64{used.InputTokens, used.CacheWriteTokens, used.CacheReadTokens, used.OutputTokens} {
				if n < 0 || n > MaxReportedTokens {
					t.Fatalf("recorded usage %+v: a count outside 0..%d", used, MaxReportedTokens)
				}
			}
		})
	}
}

// TestAddSpendSaturates: sums over ledger rows stay in what the limiter accepts.
func TestAddSpendSaturates(t *testing.T) {
	t.Parallel()
	for _, c := range [][3]int64{
		{1, 2, 3},
		{math.MaxInt64, math.MaxInt64, 1 << 51},
		{1<<51 - 1, 5, 1 << 51},
		{-5, 7, 7},
	} {
		if got := AddSpend(c[0], c[1]); got != c[2] {
			t.Errorf("AddSpend(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
