package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// priceFlags are set-price's dollar amounts, in dollars per million tokens.
var priceFlags = []struct{ name, usage string }{
	{"input", "uncached input, dollars per million tokens (e.g. 3.00)"},
	{"output", "output, dollars per million tokens (e.g. 15.00)"},
	{"cache-write", "cache writes (5-minute), dollars per million tokens; a new model: the input rate"},
	{"cache-write-1h", "1-hour cache writes, dollars per million tokens; a new model: the cache-write rate"},
	{"cache-read", "cache reads, dollars per million tokens; a new model: the input rate"},
	{"tier-input", "input above the tier threshold"},
	{"tier-output", "output above the tier threshold"},
	{"tier-cache-write", "cache writes above the tier threshold; default: cache-write scaled as input is"},
	{"tier-cache-write-1h", "1-hour cache writes above the tier threshold; default: scaled as input is"},
	{"tier-cache-read", "cache reads above the tier threshold; default: cache-read scaled as input is"},
}

// setPrice creates or changes a model's price. Amounts are dollars per million
// tokens, read exactly as decimals (never as floats; more than six decimals is an
// error). For a model that has a price, flags not given keep their value and the
// price is marked taken today (or --taken-on). A new model needs --input, --output
// and --max-output.
func setPrice(ctx context.Context, c *adminCmd, args []string) error {
	model := c.flags.String("model", "", "model name, exactly as requests send it")
	provider := c.flags.String("provider", "", "anthropic, openai, ... (default: kept, or guessed from the model name)")
	dollars := make(map[string]*string, len(priceFlags))
	for _, f := range priceFlags {
		dollars[f.name] = c.flags.String(f.name, "", f.usage)
	}
	maxOutput := c.flags.Int64("max-output", 0, "the model's maximum output tokens (held when a request sets no ceiling)")
	tierThreshold := c.flags.Int64("tier-threshold", 0, "prompt tokens above which the tier rates apply to the whole request (0 removes the tier)")
	takenOn := c.flags.String("taken-on", "", "the date the list price was taken, YYYY-MM-DD (default: today)")
	if err := parseFlags(c.flags, args); err != nil {
		return err
	}
	if *model == "" {
		return usagef("admin set-price: --model is required")
	}
	given := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// Check every amount before touching the database, so a typo is reported as one.
	micros := map[string]int64{}
	for _, f := range priceFlags {
		if !given[f.name] {
			continue
		}
		m, err := store.ParseDollars(*dollars[f.name])
		if err != nil {
			return usagef("admin set-price: --%s: %v", f.name, err)
		}
		micros[f.name] = m
	}
	var taken time.Time
	if given["taken-on"] {
		var err error
		if taken, err = time.Parse(time.DateOnly, *takenOn); err != nil {
			return usagef("admin set-price: --taken-on %q is not a date like 2026-11-30", *takenOn)
		}
	}
	if err := c.connect(); err != nil {
		return err
	}
	p, err := c.st.Price(ctx, *model)
	isNew := errors.Is(err, store.ErrNotFound)
	if err != nil && !isNew {
		return err
	}
	if isNew {
		var missing []string
		for _, name := range []string{"input", "output", "max-output"} {
			if !given[name] {
				missing = append(missing, "--"+name)
			}
		}
		if len(missing) > 0 {
			return usagef("admin set-price: %s has no price yet: give %s", *model, strings.Join(missing, ", "))
		}
		p = store.Price{Model: *model}
	}
	if given["provider"] {
		p.Provider = *provider
	}
	if given["max-output"] {
		p.MaxOutputTokens = *maxOutput
	}
	if given["tier-threshold"] {
		if p.TierThreshold = *tierThreshold; *tierThreshold == 0 {
			p.TierInputPerMTok, p.TierOutputPerMTok, p.TierCacheWritePerMTok = 0, 0, 0
			p.TierCacheWrite1hPerMTok, p.TierCacheReadPerMTok = 0, 0
		}
	}
	fields := map[string]*int64{"input": &p.InputPerMTok, "output": &p.OutputPerMTok, "cache-write": &p.CacheWritePerMTok,
		"cache-write-1h": &p.CacheWrite1hPerMTok, "cache-read": &p.CacheReadPerMTok, "tier-input": &p.TierInputPerMTok,
		"tier-output": &p.TierOutputPerMTok, "tier-cache-write": &p.TierCacheWritePerMTok,
		"tier-cache-write-1h": &p.TierCacheWrite1hPerMTok, "tier-cache-read": &p.TierCacheReadPerMTok}
	for name, m := range micros {
		*fields[name] = m
	}
	// Defaults that never under-charge: a cached token of a new model costs what
	// an input token does, and a tier's cache rates scale with its input rate, as
	// every tiered list price does.
	if isNew {
		if !given["cache-write"] {
			p.CacheWritePerMTok = p.InputPerMTok
		}
		if !given["cache-read"] {
			p.CacheReadPerMTok = p.InputPerMTok
		}
		if !given["cache-write-1h"] {
			p.CacheWrite1hPerMTok = p.CacheWritePerMTok
		}
	}
	if p.TierThreshold > 0 && p.InputPerMTok > 0 && p.TierInputPerMTok > 0 {
		for base, tier := range map[*int64]*int64{&p.CacheWritePerMTok: &p.TierCacheWritePerMTok,
			&p.CacheWrite1hPerMTok: &p.TierCacheWrite1hPerMTok, &p.CacheReadPerMTok: &p.TierCacheReadPerMTok} {
			if *tier == 0 {
				*tier = scaleUp(*base, p.TierInputPerMTok, p.InputPerMTok)
			}
		}
	}
	p.TakenOn = taken // zero: today
	saved, err := c.st.SetPrice(ctx, store.ActorCLI, p)
	if ve, ok := errors.AsType[*store.ValidationError](err); ok {
		flagName := strings.ReplaceAll(strings.TrimSuffix(ve.Field, "_tokens"), "_", "-")
		return fmt.Errorf("admin set-price: --%s: %s", flagName, ve.Message)
	}
	if err != nil {
		return err
	}
	return c.print(saved, func(w io.Writer) {
		fmt.Fprintf(w, "price of %s (%s), taken %s: %s\n", saved.Model, saved.Provider, saved.TakenOn.Format(time.DateOnly), describePrice(saved))
	})
}

// scaleUp is ceil(v × num / den), exact, saturated at the largest rate a price may have.
func scaleUp(v, num, den int64) int64 {
	q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(v), big.NewInt(num)), big.NewInt(den), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 1 << 62
	}
	return q.Int64()
}

// listPrices prints every model's price, optionally one provider's or those whose
// name starts with --model.
func listPrices(ctx context.Context, c *adminCmd, args []string) error {
	provider := c.flags.String("provider", "", "only this provider's models")
	prefix := c.flags.String("model", "", "only models whose name starts with this")
	if err := c.parse(args); err != nil {
		return err
	}
	all, err := c.st.Prices(ctx)
	if err != nil {
		return err
	}
	prices := make([]store.Price, 0, len(all))
	for _, p := range all {
		if (*provider == "" || p.Provider == *provider) && strings.HasPrefix(p.Model, *prefix) {
			prices = append(prices, p)
		}
	}
	return c.print(prices, func(w io.Writer) {
		fmt.Fprintln(w, "MODEL\tPROVIDER\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE WRITE 1H\tCACHE READ\tMAX OUTPUT\tTIER\tTAKEN")
		for _, p := range prices {
			tier := "-"
			if p.TierThreshold > 0 {
				tier = fmt.Sprintf(">%d: %s/%s", p.TierThreshold, store.FormatDollars(p.TierInputPerMTok), store.FormatDollars(p.TierOutputPerMTok))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Model, p.Provider, store.FormatDollars(p.InputPerMTok),
				store.FormatDollars(p.OutputPerMTok), store.FormatDollars(p.CacheWritePerMTok), store.FormatDollars(p.CacheWrite1hPerMTok),
				store.FormatDollars(p.CacheReadPerMTok), p.MaxOutputTokens, tier, p.TakenOn.Format(time.DateOnly))
		}
		fmt.Fprintf(w, "%d models; dollars per million tokens\n", len(prices))
	})
}

func describePrice(p store.Price) string {
	d := store.FormatDollars
	s := fmt.Sprintf("input $%s, output $%s, cache write $%s (1h $%s), cache read $%s per million tokens; max output %d tokens",
		d(p.InputPerMTok), d(p.OutputPerMTok), d(p.CacheWritePerMTok), d(p.CacheWrite1hPerMTok), d(p.CacheReadPerMTok), p.MaxOutputTokens)
	if p.TierThreshold > 0 {
		s += fmt.Sprintf("; above %d prompt tokens: input $%s, output $%s, cache write $%s (1h $%s), cache read $%s",
			p.TierThreshold, d(p.TierInputPerMTok), d(p.TierOutputPerMTok), d(p.TierCacheWritePerMTok),
			d(p.TierCacheWrite1hPerMTok), d(p.TierCacheReadPerMTok))
	}
	return s
}
