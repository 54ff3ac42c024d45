package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tollgate/tollgate/app/store"
)

const budgetUsage = `usage: tollgate admin budget <list|approve|decline|request> [flags]   (members' requests for more budget)
  list     --team T [--member E]   (pending requests; with --member, that member's newest and their answers)
  approve  --team T --id N [--note TEXT]   (the member's budget for the current period rises by exactly the amount)
  decline  --team T --id N [--note TEXT]
  request  --team T --member E --amount 20.00 --reason TEXT   (on the member's behalf; a tier's ceiling may approve it at once)`

// adminBudget is `admin budget <verb>`.
func adminBudget(ctx context.Context, c *adminCmd, args []string) error {
	if len(args) == 0 {
		return usagef("%s", budgetUsage)
	}
	verbs := map[string]func(context.Context, *adminCmd, []string) error{
		"list": listBudgetRequests, "approve": decideBudget(true), "decline": decideBudget(false), "request": requestBudget,
	}
	verb, ok := verbs[args[0]]
	if !ok {
		return usagef("admin budget: unknown verb %q\n%s", args[0], budgetUsage)
	}
	c.flags.Init("admin budget "+args[0], c.flags.ErrorHandling())
	return verb(ctx, c, args[1:])
}

func listBudgetRequests(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	var reqs []store.BudgetRequest
	if *memberRef == "" {
		reqs, err = c.st.PendingBudgetRequests(ctx, t.ID)
	} else {
		var m store.Member
		if _, m, err = c.member(ctx, *teamRef, *memberRef); err != nil {
			return err
		}
		reqs, err = c.st.MemberBudgetRequests(ctx, t.ID, m.ID, 50)
		for i := range reqs {
			reqs[i].Email = m.Email
		}
	}
	if err != nil {
		return err
	}
	return c.print(reqs, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tMEMBER\tAMOUNT\tSTATUS\tASKED\tREASON\tNOTE")
		for _, r := range reqs {
			fmt.Fprintf(tw, "%d\t%s\t$%s\t%s\t%s\t%s\t%s\n", r.ID, r.Email, store.FormatDollars(r.Amount), r.Status,
				r.CreatedAt.UTC().Format("2006-01-02 15:04"), r.Reason, r.Note)
		}
		tw.Flush()
	})
}

func decideBudget(approve bool) func(context.Context, *adminCmd, []string) error {
	return func(ctx context.Context, c *adminCmd, args []string) error {
		teamRef := c.flags.String("team", "", "team name or id")
		id := c.flags.Int64("id", 0, "request id (admin budget list)")
		note := c.flags.String("note", "", "a word to the member")
		if err := c.parse(args, "team"); err != nil {
			return err
		}
		if *id <= 0 {
			return usagef("%s: --id is required", c.flags.Name())
		}
		t, err := c.team(ctx, *teamRef)
		if err != nil {
			return err
		}
		decide := c.st.DeclineBudgetRequest
		if approve {
			decide = c.st.ApproveBudgetRequest
		}
		r, err := decide(ctx, store.ActorCLI, t.ID, *id, *note)
		if err != nil {
			return err
		}
		return c.print(r, func(w io.Writer) {
			fmt.Fprintf(w, "budget request %d ($%s) %s\n", r.ID, store.FormatDollars(r.Amount), r.Status)
		})
	}
}

func requestBudget(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	amount := c.flags.String("amount", "", "dollars more this period, e.g. 20.00")
	reason := c.flags.String("reason", "", "why")
	if err := c.parse(args, "team", "member", "amount", "reason"); err != nil {
		return err
	}
	micros, err := store.ParseDollars(*amount)
	if err != nil {
		return usagef("admin budget request: --amount: %v", err)
	}
	t, m, err := c.member(ctx, *teamRef, *memberRef)
	if err != nil {
		return err
	}
	r, err := c.st.RequestBudget(ctx, store.ActorCLI, t.ID, m.ID, micros, *reason)
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "budget request %d for %s ($%s): %s\n", r.ID, m.Email, store.FormatDollars(r.Amount), r.Status)
	})
}
