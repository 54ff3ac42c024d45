package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tollgate/tollgate/app/store"
)

const tierUsage = `usage: tollgate admin tier <create|set|assign|list|delete> [flags]   (named limit presets of a team)
  create  --team T --name N [limit flags as set-limits] [--weight 1..1000] [--auto-approve 20.00] [--over-budget refuse|fit]
  set     --team T --name N [limit flags] [--weight N] [--auto-approve D] [--over-budget refuse|fit]
          (flags not given keep their value; 0 removes)
          --over-budget fit: a request whose max_tokens does not fit the budget left is lowered to fit (at least 1024)
  assign  --team T --member E (--tier N | --none)
          (the member's own set-limits stay, and win over the tier's: set-limits --member E --rate 0 gives back the tier's)
  list    --team T
  delete  --team T --name N   (only a tier without members)
  A member's budget requests are answered with: tollgate admin budget`

// adminTier is `admin tier <verb>`.
func adminTier(ctx context.Context, c *adminCmd, args []string) error {
	if len(args) == 0 {
		return usagef("%s", tierUsage)
	}
	verbs := map[string]func(context.Context, *adminCmd, []string) error{
		"create": tierWrite(true), "set": tierWrite(false), "assign": assignTier, "list": listTiers, "delete": deleteTier,
	}
	verb, ok := verbs[args[0]]
	if !ok {
		return usagef("admin tier: unknown verb %q\n%s", args[0], tierUsage)
	}
	c.flags.Init("admin tier "+args[0], c.flags.ErrorHandling())
	return verb(ctx, c, args[1:])
}

// tierWrite creates a tier, or changes one as stored (with its row locked) by
// the flags given.
func tierWrite(create bool) func(context.Context, *adminCmd, []string) error {
	return func(ctx context.Context, c *adminCmd, args []string) error {
		teamRef := c.flags.String("team", "", "team name or id")
		name := c.flags.String("name", "", "tier name, e.g. intern")
		changeFlags := limitFlags(c)
		weight := c.flags.Int64("weight", 1, "share under contention, 1 to 1000")
		autoApprove := c.flags.String("auto-approve", "0", "budget requests approved at once per member and period, up to this many dollars")
		overBudget := c.flags.String("over-budget", "refuse", "a request that does not fit the budget left: refuse, or fit (lower its max_tokens)")
		if err := c.parse(args, "team", "name"); err != nil {
			return err
		}
		over, err := store.ParseOverBudget(*overBudget)
		if err != nil {
			return usagef("%s: --over-budget: must be refuse or fit, not %q", c.flags.Name(), *overBudget)
		}
		change, err := changeFlags()
		if err != nil {
			return err
		}
		ceiling, err := store.ParseDollars(*autoApprove)
		if err != nil {
			return usagef("%s: --auto-approve: %v", c.flags.Name(), err)
		}
		t, err := c.team(ctx, *teamRef)
		if err != nil {
			return err
		}
		apply := func(tr store.Tier) store.Tier {
			tr.Limits = change(tr.Limits)
			c.flags.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "weight":
					tr.Weight = *weight
				case "auto-approve":
					tr.AutoApprove = ceiling
				case "over-budget":
					tr.OverBudget = over
				}
			})
			return tr
		}
		var tr store.Tier
		if create {
			tr, err = c.st.CreateTier(ctx, store.ActorCLI, t.ID, apply(store.NewTier(*name)))
			err = conflict(err, "tier "+*name)
		} else {
			tr, err = c.st.ChangeTier(ctx, store.ActorCLI, t.ID, *name, apply)
		}
		if err != nil {
			return err
		}
		return c.print(tr, func(w io.Writer) { fmt.Fprintf(w, "tier %s: %s\n", tr.Name, describeTier(tr)) })
	}
}

func describeTier(tr store.Tier) string {
	s := fmt.Sprintf("%s, weight %d", describeLimits(tr.Limits), tr.Weight)
	if tr.AutoApprove > 0 {
		s += fmt.Sprintf(", auto-approves up to $%s per period", store.FormatDollars(tr.AutoApprove))
	}
	if tr.OverBudget == store.OverBudgetFit {
		s += ", fits requests to the budget left"
	}
	return s
}

func assignTier(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	tierName := c.flags.String("tier", "", "tier name")
	none := c.flags.Bool("none", false, "take the member out of their tier")
	if err := c.parse(args, "team", "member"); err != nil {
		return err
	}
	if (*tierName == "") == !*none {
		return usagef("admin tier assign: give either --tier or --none")
	}
	t, m, err := c.member(ctx, *teamRef, *memberRef)
	if err != nil {
		return err
	}
	if _, err := c.st.AssignTier(ctx, store.ActorCLI, t.ID, m.ID, *tierName); err != nil {
		return err
	}
	e, err := c.st.EffectiveLimits(ctx, t.ID, m.ID)
	if err != nil {
		return err
	}
	return c.print(e, func(w io.Writer) {
		where := "in no tier"
		if e.Tier != "" {
			where = "in the tier " + e.Tier
		}
		fmt.Fprintf(w, "%s is %s: %s\n", m.Email, where, describeLimits(e.Limits))
	})
}

func listTiers(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	tiers, err := c.st.Tiers(ctx, t.ID)
	if err != nil {
		return err
	}
	return c.print(tiers, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tMEMBERS\tLIMITS")
		for _, tr := range tiers {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", tr.Name, tr.Members, describeTier(tr))
		}
		tw.Flush()
	})
}

func deleteTier(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	name := c.flags.String("name", "", "tier name")
	if err := c.parse(args, "team", "name"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	if err := c.st.DeleteTier(ctx, store.ActorCLI, t.ID, *name); err != nil {
		return err
	}
	return c.print(map[string]string{"deleted": *name}, func(w io.Writer) { fmt.Fprintf(w, "deleted the tier %s\n", *name) })
}
