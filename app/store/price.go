package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// Price is one model's list price, as stored. Rates are micro-dollars per million
// tokens ($3 per MTok is 3000000); the tier fields are 0 when the model has no tier.
type Price struct {
	Model                   string    `json:"model"`
	Provider                string    `json:"provider"`
	InputPerMTok            int64     `json:"input_micros_per_mtok"`
	OutputPerMTok           int64     `json:"output_micros_per_mtok"`
	CacheWritePerMTok       int64     `json:"cache_write_micros_per_mtok"`
	CacheWrite1hPerMTok     int64     `json:"cache_write_1h_micros_per_mtok"`
	CacheReadPerMTok        int64     `json:"cache_read_micros_per_mtok"`
	MaxOutputTokens         int64     `json:"max_output_tokens"`
	TierThreshold           int64     `json:"tier_threshold_tokens,omitempty"`
	TierInputPerMTok        int64     `json:"tier_input_micros_per_mtok,omitempty"`
	TierOutputPerMTok       int64     `json:"tier_output_micros_per_mtok,omitempty"`
	TierCacheWritePerMTok   int64     `json:"tier_cache_write_micros_per_mtok,omitempty"`
	TierCacheWrite1hPerMTok int64     `json:"tier_cache_write_1h_micros_per_mtok,omitempty"`
	TierCacheReadPerMTok    int64     `json:"tier_cache_read_micros_per_mtok,omitempty"`
	TakenOn                 time.Time `json:"taken_on"` // the day the list price was taken (UTC midnight); zero in SetPrice: today
	UpdatedAt               time.Time `json:"updated_at"`
}

// Estimate is p as the data path prices with it.
func (p Price) Estimate() estimate.Price {
	return estimate.Price{Model: p.Model, InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok,
		CacheWritePerMTok: p.CacheWritePerMTok, CacheWrite1hPerMTok: p.CacheWrite1hPerMTok, CacheReadPerMTok: p.CacheReadPerMTok,
		MaxOutputTokens: p.MaxOutputTokens, TierThreshold: p.TierThreshold, TierInputPerMTok: p.TierInputPerMTok,
		TierOutputPerMTok: p.TierOutputPerMTok, TierCacheWritePerMTok: p.TierCacheWritePerMTok,
		TierCacheWrite1hPerMTok: p.TierCacheWrite1hPerMTok, TierCacheReadPerMTok: p.TierCacheReadPerMTok}
}

func priceFrom(r db.Price) Price {
	p := Price{Model: r.Model, Provider: r.Provider, InputPerMTok: r.InputMicrosPerMtok, OutputPerMTok: r.OutputMicrosPerMtok,
		CacheWritePerMTok: r.CacheWriteMicrosPerMtok, CacheWrite1hPerMTok: r.CacheWrite1hMicrosPerMtok,
		CacheReadPerMTok: r.CacheReadMicrosPerMtok, MaxOutputTokens: r.MaxOutputTokens,
		TierThreshold: deref(r.TierThresholdTokens), TierInputPerMTok: deref(r.TierInputMicrosPerMtok),
		TierOutputPerMTok: deref(r.TierOutputMicrosPerMtok), TierCacheWritePerMTok: deref(r.TierCacheWriteMicrosPerMtok),
		TierCacheWrite1hPerMTok: deref(r.TierCacheWrite1hMicrosPerMtok), TierCacheReadPerMTok: deref(r.TierCacheReadMicrosPerMtok),
		UpdatedAt: r.UpdatedAt}
	if r.TakenOn.Valid {
		t := r.TakenOn.Time
		p.TakenOn = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return p
}

// ProviderOf guesses a model's provider from its name: anthropic, openai or other.
func ProviderOf(model string) string {
	switch {
	case strings.HasPrefix(model, "claude"):
		return "anthropic"
	case strings.HasPrefix(model, "gpt-"), strings.HasPrefix(model, "chatgpt-"), strings.HasPrefix(model, "text-embedding-"),
		strings.HasPrefix(model, "codex-"), len(model) > 1 && model[0] == 'o' && model[1] >= '1' && model[1] <= '9':
		return "openai"
	}
	return "other"
}

// validate checks p as the data path will price with it, naming the field at fault.
func (p Price) validate() error {
	if err := checkText("model", "model", p.Model); err != nil {
		return err
	}
	if len(p.Model) > 256 || strings.ContainsFunc(p.Model, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return invalid("model", "model %q must be at most 256 bytes with no spaces or control characters", p.Model)
	}
	if p.Provider == "" || len(p.Provider) > 64 || strings.ContainsFunc(p.Provider, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_'
	}) {
		return invalid("provider", "provider %q must be a short lower-case name such as anthropic or openai", p.Provider)
	}
	if err := p.Estimate().Validate(); err != nil {
		var pe *estimate.PriceError
		if errors.As(err, &pe) {
			return invalid(pe.Field, "%s", pe.Message)
		}
		return invalid("price", "%v", err)
	}
	return nil
}

// Prices lists every model's price, by provider and model.
func (s *Store) Prices(ctx context.Context) ([]Price, error) {
	rows, err := s.q.PriceList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: list prices: %w", err)
	}
	prices := make([]Price, len(rows))
	for i, r := range rows {
		prices[i] = priceFrom(r)
	}
	return prices, nil
}

// Price returns one model's price, or ErrNotFound.
func (s *Store) Price(ctx context.Context, model string) (Price, error) {
	// Postgres refuses such bytes with an error of its own; the caller gets ours.
	if err := CheckUTF8("model", "model", model); err != nil {
		return Price{}, err
	}
	r, err := s.q.PriceGet(ctx, s.pool, model)
	if err != nil {
		return Price{}, fmt.Errorf("store: price of %s: %w", model, mapErr(err))
	}
	return priceFrom(r), nil
}

// SetPrice creates or replaces a model's price after checking it as the data path
// will use it; every replica prices with it from its next snapshot reload. A blank
// Provider is guessed from the model name (ProviderOf).
func (s *Store) SetPrice(ctx context.Context, actor Actor, p Price) (Price, error) {
	if p.Provider == "" {
		p.Provider = ProviderOf(p.Model)
	}
	if err := p.validate(); err != nil {
		return Price{}, err
	}
	params := db.PriceUpsertParams{Model: p.Model, Provider: p.Provider, InputMicrosPerMtok: p.InputPerMTok,
		OutputMicrosPerMtok: p.OutputPerMTok, CacheWriteMicrosPerMtok: p.CacheWritePerMTok,
		CacheWrite1hMicrosPerMtok: p.CacheWrite1hPerMTok, CacheReadMicrosPerMtok: p.CacheReadPerMTok,
		MaxOutputTokens: p.MaxOutputTokens}
	if p.TierThreshold > 0 {
		params.TierThresholdTokens, params.TierInputMicrosPerMtok = &p.TierThreshold, &p.TierInputPerMTok
		params.TierOutputMicrosPerMtok, params.TierCacheWriteMicrosPerMtok = &p.TierOutputPerMTok, &p.TierCacheWritePerMTok
		params.TierCacheWrite1hMicrosPerMtok, params.TierCacheReadMicrosPerMtok = &p.TierCacheWrite1hPerMTok, &p.TierCacheReadPerMTok
	}
	if !p.TakenOn.IsZero() {
		params.TakenOn = pgtype.Date{Time: p.TakenOn.UTC(), Valid: true}
	}
	var saved Price
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var before any
		if r, err := s.q.PriceGet(ctx, tx, p.Model); err == nil {
			before = priceFrom(r)
		} else if err = mapErr(err); !errors.Is(err, ErrNotFound) {
			return err
		}
		r, err := s.q.PriceUpsert(ctx, tx, params)
		if err != nil {
			return mapErr(err)
		}
		saved = priceFrom(r)
		return s.audit(ctx, tx, actor, auditEntry{action: ActionPriceSet, target: saved.Model, before: before, after: saved})
	})
	if err != nil {
		return Price{}, fmt.Errorf("store: set price of %s: %w", p.Model, err)
	}
	return saved, nil
}

// PriceTable is every model's price as the data path looks them up, for the
// config snapshot. A stored price that no longer validates (a hand-edited row) is
// left out, so its model is refused as unknown rather than priced wrongly.
func (s *Store) PriceTable(ctx context.Context) (estimate.Table, error) {
	t, err := s.priceTable(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: price table: %w", err)
	}
	return t, nil
}

// priceTable reads the table on q, so Snapshot can read it in its own transaction.
func (s *Store) priceTable(ctx context.Context, q db.DBTX) (estimate.Table, error) {
	rows, err := s.q.PriceList(ctx, q)
	if err != nil {
		return nil, err
	}
	t := make(estimate.Table, len(rows))
	for _, r := range rows {
		p := priceFrom(r)
		if err := p.validate(); err != nil {
			s.log.Error("price ignored: invalid", "model", p.Model, "err", err)
			continue
		}
		t[p.Model] = p.Estimate()
	}
	return t, nil
}

// ParseDollars reads a dollar amount written as a decimal ("3", "3.00", "0.075",
// "$15") into micro-dollars, exactly: no float is involved, and more than six
// decimal places (finer than a micro-dollar) is an error rather than rounded.
func ParseDollars(s string) (int64, error) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, dot := strings.Cut(v, ".")
	if whole == "" && (!dot || frac == "") || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a dollar amount: write it like 3, 3.00 or 0.075", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%q has %d decimal places; the smallest amount is $0.000001 (one micro-dollar)", s, len(frac))
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 12 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	var micros int64
	for _, c := range whole + frac + strings.Repeat("0", 6-len(frac)) {
		micros = micros*10 + int64(c-'0')
	}
	return micros, nil
}

// FormatDollars writes micro-dollars as dollars with at least two decimals and no
// trailing zeros past them: 3000000 is "3.00", 75000 is "0.075".
func FormatDollars(micros int64) string {
	sign, u := "", uint64(micros)
	if micros < 0 {
		sign, u = "-", -u
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, u/1_000_000, frac)
}
