package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

const tokenUsage = `usage: tollgate admin token <create|list|revoke> [flags]   (admin tokens for the JSON API at /api/v1/)
  create  (--team T | --deployment) --name N [--role owner|read] [--expires 2160h]
          (prints the token once; a --deployment token manages the global price list only)
  list    (--team T | --deployment)
  revoke  --id ID`

// adminToken is `admin token <verb>`: admin tokens for scripts and CI.
func adminToken(ctx context.Context, c *adminCmd, args []string) error {
	if len(args) == 0 {
		return usagef("%s", tokenUsage)
	}
	verbs := map[string]func(context.Context, *adminCmd, []string) error{
		"create": createToken, "list": listTokens, "revoke": revokeToken,
	}
	verb, ok := verbs[args[0]]
	if !ok {
		return usagef("admin token: unknown verb %q\n%s", args[0], tokenUsage)
	}
	c.flags.Init("admin token "+args[0], c.flags.ErrorHandling())
	return verb(ctx, c, args[1:])
}

// tokenScope reads --team or --deployment (exactly one) into the team id a
// token belongs to, nil for the deployment.
func (c *adminCmd) tokenScope(ctx context.Context, teamRef string, deployment bool) (*int64, error) {
	if (teamRef == "") == !deployment {
		return nil, usagef("%s: give either --team or --deployment", c.flags.Name())
	}
	if deployment {
		return nil, nil
	}
	t, err := c.team(ctx, teamRef)
	if err != nil {
		return nil, err
	}
	return &t.ID, nil
}

func createToken(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	deployment := c.flags.Bool("deployment", false, "a deployment-level token (global prices) instead of a team's")
	name := c.flags.String("name", "", "what the token is for, e.g. ci-deploy")
	role := c.flags.String("role", store.TokenRoleOwner, "owner (every change) or read (reads only)")
	expires := c.flags.Duration("expires", 90*24*time.Hour, "how long until it stops working (at most 8784h)")
	if err := c.parse(args, "name"); err != nil {
		return err
	}
	teamID, err := c.tokenScope(ctx, *teamRef, *deployment)
	if err != nil {
		return err
	}
	t, err := c.st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{TeamID: teamID, Name: *name, Role: *role, Lifetime: *expires})
	if err != nil {
		return err
	}
	return c.print(t, func(w io.Writer) {
		fmt.Fprintf(w, "admin token %s (%s, %s) expires %s. It is shown only this once:\n%s\n",
			t.ID, t.Name, t.Role, t.ExpiresAt.UTC().Format(time.RFC3339), t.Plaintext)
	})
}

func listTokens(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	deployment := c.flags.Bool("deployment", false, "the deployment-level tokens")
	if err := c.parse(args); err != nil {
		return err
	}
	teamID, err := c.tokenScope(ctx, *teamRef, *deployment)
	if err != nil {
		return err
	}
	tokens, err := c.st.AdminTokens(ctx, teamID)
	if err != nil {
		return err
	}
	return c.print(tokens, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tNAME\tROLE\tSTATE\tEXPIRES\tLAST USED\tBELONGS TO")
		now := time.Now()
		for _, t := range tokens {
			used := "never"
			if t.LastUsedAt != nil {
				used = t.LastUsedAt.UTC().Format(time.DateTime)
			}
			owner := t.Owner
			if t.Owner == store.OwnerMember {
				owner = t.OwnerEmail
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.State(now), t.ExpiresAt.UTC().Format(time.DateTime), used, owner)
		}
	})
}

func revokeToken(ctx context.Context, c *adminCmd, args []string) error {
	id := c.flags.String("id", "", "token id")
	if err := c.parse(args, "id"); err != nil {
		return err
	}
	t, err := c.st.FindAdminToken(ctx, *id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no admin token %q", *id)
	}
	if err != nil {
		return err
	}
	if t, err = c.st.RevokeAdminToken(ctx, store.ActorCLI, t.TeamID, t.ID); err != nil {
		return err
	}
	return c.print(t, func(w io.Writer) { fmt.Fprintf(w, "revoked admin token %s (%s)\n", t.ID, t.Name) })
}
