package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// setLimits changes a member's limits, or the team's without --member. Flags not
// given keep their current value; 0 removes a limit (for a member in a tier:
// their override, so the tier's limit applies).
func setLimits(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id (omit for the team-wide limits)")
	changeFlags := limitFlags(c)
	overBudget := c.flags.String("over-budget", "", "team-wide only: a request of a member in no tier that does not fit the budget left: refuse, or fit (lower its max_tokens)")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	change, err := changeFlags()
	if err != nil {
		return err
	}
	var over store.OverBudget
	if *overBudget != "" {
		if *memberRef != "" {
			return usagef("%s: --over-budget is the team's, for members in no tier; a tier sets its own (admin tier set --over-budget)", c.flags.Name())
		}
		if over, err = store.ParseOverBudget(*overBudget); err != nil {
			return usagef("%s: --over-budget: must be refuse or fit, not %q", c.flags.Name(), *overBudget)
		}
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	if over != "" {
		if t, err = c.st.SetTeamOverBudget(ctx, store.ActorCLI, t.ID, over); err != nil {
			return err
		}
	}
	var m store.Member
	if *memberRef != "" {
		if _, m, err = c.member(ctx, *teamRef, *memberRef); err != nil {
			return err
		}
	}
	whose := "team " + t.Name
	var l store.Limits
	if *memberRef == "" {
		l, err = c.st.ChangeTeamLimits(ctx, store.ActorCLI, t.ID, change)
	} else {
		whose = m.Email
		l, err = c.st.ChangeMemberLimits(ctx, store.ActorCLI, t.ID, m.ID, change)
	}
	if err != nil {
		return err
	}
	return c.print(l, func(w io.Writer) { fmt.Fprintf(w, "limits of %s: %s\n", whose, describeLimits(l)) })
}

// limitFlags defines the limit flags on c; after parsing, the function it
// returns gives the change they make. The flags given change the limits as
// stored when the store holds the lock, not as read here: a concurrent change
// of another flag stays.
func limitFlags(c *adminCmd) func() (func(store.Limits) store.Limits, error) {
	var (
		algorithm, budget, budgetPeriod string
		rate, burst, concurrency, tpm   int64
		period                          time.Duration
	)
	// Each limit goes by the admin API's name (rate_limit is --rate-limit)
	// and by its older short flag; both set the same value.
	for _, name := range []string{"rate-algorithm", "algorithm"} {
		c.flags.StringVar(&algorithm, name, "", "token_bucket or sliding_window")
	}
	for _, f := range []struct {
		names [2]string
		v     *int64
		usage string
	}{
		{[2]string{"rate-limit", "rate"}, &rate, "requests per period (0: no rate limit)"},
		{[2]string{"rate-burst", "burst"}, &burst, "token bucket capacity (0: same as --rate-limit)"},
		{[2]string{"concurrency", ""}, &concurrency, "requests in flight at once (0: no cap)"},
		{[2]string{"tokens-per-minute", "tpm"}, &tpm, "tokens per minute (0: no limit)"},
	} {
		for _, name := range f.names {
			if name != "" {
				c.flags.Int64Var(f.v, name, 0, f.usage)
			}
		}
	}
	for _, name := range []string{"rate-period", "period"} {
		c.flags.DurationVar(&period, name, 0, "rate period, e.g. 1s or 1m")
	}
	for _, name := range []string{"budget-usd", "budget"} {
		c.flags.StringVar(&budget, name, "", "spend limit per budget period in dollars, e.g. 25.00 (\"none\": no budget)")
	}
	c.flags.StringVar(&budgetPeriod, "budget-period", "", "total, daily or monthly (UTC)")
	return func() (func(store.Limits) store.Limits, error) {
		var budgetMicros *int64
		if (flagGiven(c.flags, "budget") || flagGiven(c.flags, "budget-usd")) && budget != "none" {
			micros, err := store.ParseDollars(budget)
			if err != nil {
				return nil, usagef("%s: --budget-usd: %v", c.flags.Name(), err)
			}
			budgetMicros = &micros
		}
		return func(l store.Limits) store.Limits {
			c.flags.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "rate-algorithm", "algorithm":
					l.RateAlgorithm = algorithm
				case "rate-limit", "rate":
					l.RateLimit = rate
				case "rate-period", "period":
					l.RatePeriod = period
				case "rate-burst", "burst":
					l.RateBurst = burst
				case "concurrency":
					l.Concurrency = concurrency
				case "tokens-per-minute", "tpm":
					l.TokensPerMinute = tpm
				case "budget-period":
					l.BudgetPeriod = budgetPeriod
				case "budget-usd", "budget":
					l.Budget = budgetMicros
				}
			})
			return l
		}, nil
	}
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func describeLimits(l store.Limits) string {
	rate := "no rate limit"
	if l.RateLimit > 0 {
		rate = fmt.Sprintf("%d per %s (%s", l.RateLimit, l.RatePeriod, l.RateAlgorithm)
		if l.RateBurst > 0 {
			rate += fmt.Sprintf(", burst %d", l.RateBurst)
		}
		rate += ")"
	}
	parts := []string{rate, "no cap on requests in flight", "no token limit", "no budget"}
	if l.Concurrency > 0 {
		parts[1] = fmt.Sprintf("at most %d in flight", l.Concurrency)
	}
	if l.TokensPerMinute > 0 {
		parts[2] = fmt.Sprintf("%d tokens/min", l.TokensPerMinute)
	}
	if l.Budget != nil {
		parts[3] = fmt.Sprintf("budget $%s %s", store.FormatDollars(*l.Budget), l.BudgetPeriod)
	}
	return strings.Join(parts, ", ")
}
