package store_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// priceFixture is a store on its own schema, with its pool for raw SQL.
type priceFixture struct {
	*fixture
	pool *pgxpool.Pool
}

func setupPrices(t *testing.T) *priceFixture {
	t.Helper()
	pool := dbtest.Pool(t, dbtest.Schema(t))
	return &priceFixture{fixture: &fixture{st: store.New(pool)}, pool: pool}
}

func TestSeededPrices(t *testing.T) {
	t.Parallel()
	st := store.New(dbtest.Pool(t, dbtest.Schema(t)))
	prices := must(st.Prices(t.Context()))(t)
	if len(prices) < 100 {
		t.Fatalf("%d seeded prices, want the Anthropic and OpenAI catalogue", len(prices))
	}
	byModel := map[string]store.Price{}
	taken := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, p := range prices {
		byModel[p.Model] = p
		// Every seeded row prices as the data path will use it.
		if err := p.Estimate().Validate(); err != nil {
			t.Errorf("seeded %s does not validate: %v", p.Model, err)
		}
		if !p.TakenOn.Equal(taken) {
			t.Errorf("seeded %s taken on %s, want %s", p.Model, p.TakenOn, taken)
		}
	}
	want := map[string]store.Price{
		"claude-sonnet-4-5": {Provider: "anthropic", InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000,
			CacheWritePerMTok: 3_750_000, CacheWrite1hPerMTok: 6_000_000, CacheReadPerMTok: 300_000, MaxOutputTokens: 64_000,
			TierThreshold: 200_000, TierInputPerMTok: 6_000_000, TierOutputPerMTok: 22_500_000, TierCacheWritePerMTok: 7_500_000,
			TierCacheWrite1hPerMTok: 12_000_000, TierCacheReadPerMTok: 600_000},
		"gpt-4o": {Provider: "openai", InputPerMTok: 2_500_000, OutputPerMTok: 10_000_000, CacheWritePerMTok: 2_500_000,
			CacheWrite1hPerMTok: 2_500_000, CacheReadPerMTok: 1_250_000, MaxOutputTokens: 16_384},
		"gpt-4o-mini": {Provider: "openai", InputPerMTok: 150_000, OutputPerMTok: 600_000, CacheWritePerMTok: 150_000,
			CacheWrite1hPerMTok: 150_000, CacheReadPerMTok: 75_000, MaxOutputTokens: 16_384},
		"text-embedding-3-small": {Provider: "openai", InputPerMTok: 20_000, CacheWritePerMTok: 20_000,
			CacheWrite1hPerMTok: 20_000, CacheReadPerMTok: 20_000, MaxOutputTokens: 1},
		"gpt-5-nano": {Provider: "openai", InputPerMTok: 50_000, OutputPerMTok: 400_000, CacheWritePerMTok: 50_000,
			CacheWrite1hPerMTok: 50_000, CacheReadPerMTok: 5_000, MaxOutputTokens: 128_000},
		"o3": {Provider: "openai", InputPerMTok: 2_000_000, OutputPerMTok: 8_000_000, CacheWritePerMTok: 2_000_000, // the 2025-06-10 price
			CacheWrite1hPerMTok: 2_000_000, CacheReadPerMTok: 500_000, MaxOutputTokens: 100_000},
	}
	for model, w := range want {
		got, ok := byModel[model]
		w.Model, w.TakenOn, got.UpdatedAt = model, taken, time.Time{}
		if !ok || got != w {
			t.Errorf("seeded %s:\n got %+v\nwant %+v", model, got, w)
		}
	}
	for _, alias := range []string{"claude-sonnet-4-5-20250929", "claude-haiku-4-5", "gpt-4o-mini-2024-07-18", "gpt-4.1"} {
		if _, ok := byModel[alias]; !ok {
			t.Errorf("no seeded price for %s", alias)
		}
	}
	if got := byModel["claude-sonnet-4-5-20250929"]; got.InputPerMTok != 3_000_000 || got.TierThreshold != 200_000 {
		t.Errorf("claude-sonnet-4-5-20250929 = %+v, want claude-sonnet-4-5's price", got)
	}
}

func TestSetPrice(t *testing.T) {
	t.Parallel()
	f := setupPrices(t)
	ctx := t.Context()
	p := store.Price{Model: "claude-test", InputPerMTok: 1_000_000, OutputPerMTok: 5_000_000, CacheWritePerMTok: 1_250_000,
		CacheReadPerMTok: 100_000, MaxOutputTokens: 8192, TakenOn: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	var saved store.Price
	added := f.audited(t, func() { saved = must(f.st.SetPrice(ctx, actor, p))(t) })
	if saved.Provider != "anthropic" || saved.InputPerMTok != 1_000_000 || !saved.TakenOn.Equal(p.TakenOn) {
		t.Errorf("SetPrice = %+v", saved)
	}
	if got := actions(added); got != "price.set claude-test" {
		t.Errorf("audit = %s, want price.set claude-test", got)
	}
	if len(added) == 1 && (len(added[0].Before) != 0 || added[0].TeamID != nil || auditPrice(t, added[0].After).InputPerMTok != 1_000_000) {
		t.Errorf("audit row = %+v, want no before, no team, the price after", added[0])
	}

	// Replacing it records before and after; without a date, taken today.
	p.OutputPerMTok, p.TakenOn = 6_000_000, time.Time{}
	added = f.audited(t, func() { saved = must(f.st.SetPrice(ctx, actor, p))(t) })
	if saved.OutputPerMTok != 6_000_000 || saved.TakenOn.IsZero() || time.Since(saved.TakenOn) > 48*time.Hour {
		t.Errorf("replaced price = %+v", saved)
	}
	if len(added) != 1 || auditPrice(t, added[0].Before).OutputPerMTok != 5_000_000 || auditPrice(t, added[0].After).OutputPerMTok != 6_000_000 {
		t.Errorf("replacing audit = %+v, want the old price as before", added)
	}
	if got := must(f.st.Price(ctx, "claude-test"))(t); got.OutputPerMTok != 6_000_000 {
		t.Errorf("Price(claude-test) = %+v", got)
	}
	if _, err := f.st.Price(ctx, "no-such-model"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Price(no-such-model) err = %v, want ErrNotFound", err)
	}

	// Tiers round-trip, and removing the threshold removes them.
	p.TierThreshold, p.TierInputPerMTok, p.TierOutputPerMTok, p.TierCacheReadPerMTok = 1000, 2_000_000, 7_500_000, 200_000
	saved = must(f.st.SetPrice(ctx, actor, p))(t)
	if saved.TierThreshold != 1000 || saved.TierOutputPerMTok != 7_500_000 || saved.TierCacheReadPerMTok != 200_000 {
		t.Errorf("tiered price = %+v", saved)
	}
	p.TierThreshold, p.TierInputPerMTok, p.TierOutputPerMTok, p.TierCacheReadPerMTok = 0, 0, 0, 0
	if saved = must(f.st.SetPrice(ctx, actor, p))(t); saved.TierThreshold != 0 || saved.TierInputPerMTok != 0 {
		t.Errorf("untiered price = %+v", saved)
	}
}

func auditPrice(t *testing.T, raw []byte) store.Price {
	t.Helper()
	var p store.Price
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("audit price %s: %v", raw, err)
	}
	return p
}

func TestSetPriceRefusesBadPrices(t *testing.T) {
	t.Parallel()
	f := setupPrices(t)
	ok := store.Price{Model: "m-test", Provider: "other", InputPerMTok: 1, OutputPerMTok: 1, MaxOutputTokens: 1}
	with := func(change func(p *store.Price)) store.Price {
		p := ok
		change(&p)
		return p
	}
	tests := []struct {
		name  string
		price store.Price
		field string
	}{
		{"negative input", with(func(p *store.Price) { p.InputPerMTok = -1 }), "input"},
		{"free", with(func(p *store.Price) { p.InputPerMTok, p.OutputPerMTok = 0, 0 }), "input"},
		{"no max output", with(func(p *store.Price) { p.MaxOutputTokens = 0 }), "max_output_tokens"},
		{"tier without threshold", with(func(p *store.Price) { p.TierInputPerMTok = 5 }), "tier_input"},
		{"threshold without tier", with(func(p *store.Price) { p.TierThreshold = 10 }), "tier_input"},
		{"tier below base", with(func(p *store.Price) {
			p.TierThreshold, p.TierInputPerMTok, p.CacheReadPerMTok, p.TierCacheReadPerMTok = 10, 2, 5, 1
		}), "tier_cache_read"},
		{"model with a space", with(func(p *store.Price) { p.Model = "gpt 4" }), "model"},
		{"provider upper-case", with(func(p *store.Price) { p.Provider = "OpenAI" }), "provider"},
	}
	for _, tt := range tests {
		added := f.audited(t, func() {
			_, err := f.st.SetPrice(t.Context(), actor, tt.price)
			var ve *store.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field {
				t.Errorf("%s: err = %v, want a validation error for %s", tt.name, err, tt.field)
			}
		})
		if len(added) != 0 {
			t.Errorf("%s: refused, yet audited %s", tt.name, actions(added))
		}
	}
	if _, err := f.st.Price(t.Context(), "m-test"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused price was stored: %v", err)
	}
}

func TestPriceTable(t *testing.T) {
	t.Parallel()
	f := setupPrices(t)
	must(f.st.SetPrice(t.Context(), actor, store.Price{Model: "gpt-test", InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000,
		MaxOutputTokens: 100}))(t)
	// A hand-edited row that no longer validates is left out, not priced wrongly.
	if _, err := f.pool.Exec(t.Context(), `UPDATE price SET input_micros_per_mtok = 0, output_micros_per_mtok = 0 WHERE model = 'gpt-4'`); err != nil {
		t.Fatal(err)
	}
	table := must(f.st.PriceTable(t.Context()))(t)
	if p, err := table.Lookup("gpt-test"); err != nil || p.InputPerMTok != 1_000_000 || p.MaxOutputTokens != 100 {
		t.Errorf("Lookup(gpt-test) = %+v, %v", p, err)
	}
	sonnet, err := table.Lookup("claude-sonnet-4-5")
	if err != nil || sonnet.Cost(estimate.Usage{InputTokens: 1000, OutputTokens: 1000}) != 18_000 {
		t.Errorf("claude-sonnet-4-5 prices 1000 in + 1000 out at %d, %v; want 18000 micros", sonnet.Cost(estimate.Usage{InputTokens: 1000, OutputTokens: 1000}), err)
	}
	if _, err := table.Lookup("gpt-4"); !errors.Is(err, estimate.ErrUnknownModel) {
		t.Errorf("an invalid stored price was used: %v", err)
	}
}

// Re-running the seed never overwrites a price an owner has edited.
func TestSeedKeepsOwnerEdits(t *testing.T) {
	t.Parallel()
	f := setupPrices(t)
	must(f.st.SetPrice(t.Context(), actor, store.Price{Model: "gpt-4o", InputPerMTok: 9_000_000, OutputPerMTok: 9_000_000,
		MaxOutputTokens: 100}))(t)
	migration := string(must(os.ReadFile("../../migrations/0003_prices.sql"))(t))
	start := strings.Index(migration, "INSERT INTO price")
	end := strings.Index(migration, "ON CONFLICT (model) DO NOTHING;")
	if start < 0 || end < 0 {
		t.Fatal("0003_prices.sql has no INSERT ... ON CONFLICT (model) DO NOTHING")
	}
	if _, err := f.pool.Exec(t.Context(), migration[start:end+len("ON CONFLICT (model) DO NOTHING")]); err != nil {
		t.Fatal(err)
	}
	if p := must(f.st.Price(t.Context(), "gpt-4o"))(t); p.InputPerMTok != 9_000_000 {
		t.Errorf("after re-seeding, gpt-4o input = %d, want the owner's 9000000", p.InputPerMTok)
	}
}

func TestParseDollars(t *testing.T) {
	t.Parallel()
	good := map[string]int64{"3": 3_000_000, "3.00": 3_000_000, "0.075": 75_000, "$15": 15_000_000, " 22.5 ": 22_500_000,
		".5": 500_000, "3.": 3_000_000, "0.000001": 1, "0": 0, "000.10": 100_000, "999999999999.999999": 999_999_999_999_999_999}
	for in, want := range good {
		if got, err := store.ParseDollars(in); err != nil || got != want {
			t.Errorf("ParseDollars(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{"0.0000001": "7 decimal places", "1.1234567": "7 decimal places", "-3": "not a dollar amount",
		"1e3": "not a dollar amount", "": "not a dollar amount", ".": "not a dollar amount", "$": "not a dollar amount",
		"3,00": "not a dollar amount", "+3": "not a dollar amount", "NaN": "not a dollar amount", "1.2.3": "not a dollar amount",
		"1000000000000": "too large"}
	for in, want := range bad {
		if _, err := store.ParseDollars(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDollars(%q) err = %v, want %q", in, err, want)
		}
	}
	for micros, want := range map[int64]string{3_000_000: "3.00", 75_000: "0.075", 22_500_000: "22.50", 1: "0.000001", 0: "0.00",
		-1_500_000: "-1.50", 123_456_789: "123.456789"} {
		if got := store.FormatDollars(micros); got != want {
			t.Errorf("FormatDollars(%d) = %q, want %q", micros, got, want)
		}
	}
}

func TestProviderOf(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]string{"claude-sonnet-4-5": "anthropic", "gpt-4o": "openai", "o3-mini": "openai",
		"text-embedding-3-small": "openai", "chatgpt-4o-latest": "openai", "llama-3": "other", "omni": "other"} {
		if got := store.ProviderOf(model); got != want {
			t.Errorf("ProviderOf(%s) = %s, want %s", model, got, want)
		}
	}
}
