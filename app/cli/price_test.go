package cli_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/store"
)

func TestSetPrice(t *testing.T) {
	t.Parallel()
	c := newTool(t)

	// A new model: amounts read exactly, cache rates default to the input rate.
	var p store.Price
	c.json(&p, "admin", "set-price", "--model", "gpt-test", "--input", "0.075", "--output", "$15", "--max-output", "4096",
		"--taken-on", "2026-12-01")
	want := store.Price{Model: "gpt-test", Provider: "openai", InputPerMTok: 75_000, OutputPerMTok: 15_000_000,
		CacheWritePerMTok: 75_000, CacheWrite1hPerMTok: 75_000, CacheReadPerMTok: 75_000, MaxOutputTokens: 4096,
		TakenOn: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	p.UpdatedAt = time.Time{}
	if p != want {
		t.Errorf("set-price of a new model:\n got %+v\nwant %+v", p, want)
	}

	// Changing one rate keeps the others; the price is marked taken today.
	out := c.ok("admin", "set-price", "--model", "gpt-test", "--output", "14.999999")
	wantOutput(t, "set-price", out, "price of gpt-test (openai), taken "+time.Now().UTC().Format(time.DateOnly),
		"input $0.075, output $14.999999, cache write $0.075 (1h $0.075), cache read $0.075 per million tokens; max output 4096 tokens")

	// A tier: its cache rates scale with its input rate unless given.
	c.json(&p, "admin", "set-price", "--model", "claude-test", "--provider", "anthropic", "--input", "3", "--output", "15",
		"--cache-write", "3.75", "--cache-write-1h", "6", "--cache-read", "0.30", "--max-output", "64000",
		"--tier-threshold", "200000", "--tier-input", "6.00", "--tier-output", "22.50")
	if p.TierThreshold != 200_000 || p.TierInputPerMTok != 6_000_000 || p.TierOutputPerMTok != 22_500_000 ||
		p.TierCacheWritePerMTok != 7_500_000 || p.TierCacheWrite1hPerMTok != 12_000_000 || p.TierCacheReadPerMTok != 600_000 {
		t.Errorf("tiered set-price = %+v", p)
	}
	wantOutput(t, "set-price", c.ok("admin", "set-price", "--model", "claude-test", "--tier-cache-read", "0.7"),
		"above 200000 prompt tokens: input $6.00, output $22.50, cache write $7.50 (1h $12.00), cache read $0.70")
	var untiered store.Price
	c.json(&untiered, "admin", "set-price", "--model", "claude-test", "--tier-threshold", "0")
	if untiered.TierThreshold != 0 || untiered.TierInputPerMTok != 0 || untiered.TierCacheReadPerMTok != 0 || untiered.InputPerMTok != 3_000_000 {
		t.Errorf("--tier-threshold 0 = %+v, want the tier removed and the rest kept", untiered)
	}

	// The list shows seeded and set prices; the audit log has every change.
	out = c.ok("admin", "list-prices")
	wantOutput(t, "list-prices", out, "MODEL", "gpt-test", "claude-sonnet-4-5 ", "3.00", "15.00", ">200000: 6.00/22.50", "2026-11-30",
		"text-embedding-3-small", "models; dollars per million tokens")
	var listed []store.Price
	c.json(&listed, "admin", "list-prices", "--provider", "anthropic", "--model", "claude-sonnet-4-5")
	if len(listed) < 2 || listed[0].Model != "claude-sonnet-4-5" || listed[0].InputPerMTok != 3_000_000 {
		t.Errorf("list-prices --provider anthropic --model claude-sonnet-4-5 = %+v", listed)
	}
	for _, l := range listed {
		if l.Provider != "anthropic" || !strings.HasPrefix(l.Model, "claude-sonnet-4-5") {
			t.Errorf("list-prices filter let %s (%s) through", l.Model, l.Provider)
		}
	}
	wantOutput(t, "audit", c.ok("admin", "audit"), "price.set  gpt-test", "price.set  claude-test")
}

func TestSetPriceMistakes(t *testing.T) {
	t.Parallel()
	// Typos are reported before the database is opened.
	c := noDB(t)
	usage := []struct {
		args []string
		want string
	}{
		{[]string{"--input", "3"}, "--model is required"},
		{[]string{"--model", "m", "--input", "0.0000001"}, "--input: \"0.0000001\" has 7 decimal places; the smallest amount is $0.000001"},
		{[]string{"--model", "m", "--output", "1e3"}, `--output: "1e3" is not a dollar amount`},
		{[]string{"--model", "m", "--cache-read", "-0.30"}, `--cache-read: "-0.30" is not a dollar amount`},
		{[]string{"--model", "m", "--input", "3,50"}, `--input: "3,50" is not a dollar amount`},
		{[]string{"--model", "m", "--taken-on", "yesterday"}, `--taken-on "yesterday" is not a date`},
		{[]string{"--model", "m", "--max-output", "lots"}, "invalid value"},
	}
	for _, tt := range usage {
		_, err := c.run(append([]string{"admin", "set-price"}, tt.args...)...)
		if _, ok := errors.AsType[*cli.UsageError](err); !ok || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("set-price %v: err = %v, want a usage error saying %q", tt.args, err, tt.want)
		}
	}

	// Prices the store refuses name the flag.
	d := newTool(t)
	refused := []struct {
		args []string
		want string
	}{
		{[]string{"--model", "new-model", "--input", "1"}, "new-model has no price yet: give --output, --max-output"},
		{[]string{"--model", "gpt-4o", "--input", "0", "--output", "0"}, "--input: input and output are both $0"},
		{[]string{"--model", "gpt-4o", "--max-output", "0"}, "--max-output: maximum output must be from 1"},
		{[]string{"--model", "gpt-4o", "--tier-threshold", "1000", "--tier-input", "1"}, "--tier-input: tier rate 1000000 is below the base rate 2500000"},
		{[]string{"--model", "gpt-4o", "--tier-input", "9"}, "--tier-input: a tier rate needs a tier threshold"},
		{[]string{"--model", "gpt-4o", "--input", "1000001"}, "--input: rate must be from 0 to 1000000000000"},
		{[]string{"--model", "gpt-4o", "--provider", "Open AI"}, "--provider: provider \"Open AI\" must be a short lower-case name"},
	}
	for _, tt := range refused {
		if _, err := d.run(append([]string{"admin", "set-price"}, tt.args...)...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("set-price %v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
	var gpt4o []store.Price
	d.json(&gpt4o, "admin", "list-prices", "--model", "gpt-4o")
	for _, p := range gpt4o {
		if p.Model == "gpt-4o" && (p.InputPerMTok != 2_500_000 || p.MaxOutputTokens != 16_384 || p.TierThreshold != 0) {
			t.Errorf("a refused set-price changed gpt-4o: %+v", p)
		}
	}
}
