package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

// setupLink is `tollgate admin setup-link`: a fresh one-time link that creates
// the first team and its owner in the console, while the deployment has no
// owner. Further teams: create-team, then invite --role owner.
func setupLink(ctx context.Context, c *adminCmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	link, inv, err := newSetupLink(ctx, c.st, c.cfg.PublicURL)
	if errors.Is(err, store.ErrSetupDone) {
		return errors.New("setup-link: this gateway already has an owner, so a setup link would not work; " +
			"for a further team: tollgate admin create-team --name T, then tollgate admin invite --team T --email E --role owner")
	}
	if err != nil {
		return err
	}
	out := struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}{link, inv.ExpiresAt}
	return c.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "Open this link to create a team and its owner. It works once, until %s:\n  %s\n",
			inv.ExpiresAt.UTC().Format(time.RFC3339), link)
	})
}

// firstRunSetupLink returns a setup link while the deployment has no owner
// (a fresh database), for `serve` to print; "" afterwards, so every start does
// not mint a link, and one printed earlier is refused (store.ErrSetupDone).
func firstRunSetupLink(ctx context.Context, st *store.Store, publicURL string) (string, error) {
	link, _, err := newSetupLink(ctx, st, publicURL)
	if errors.Is(err, store.ErrSetupDone) {
		return "", nil
	}
	return link, err
}

// invite is `tollgate admin invite`: a one-time link for email to join a team,
// the way an owner of a further team gets in (setup links make the first team
// only). It is the console's invite: a team that signs in only through its
// provider has it completed there.
func invite(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	email := c.flags.String("email", "", "email of the person invited")
	role := c.flags.String("role", store.RoleMember, "member or owner")
	if err := c.parse(args, "team", "email"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	token, inv, err := c.st.CreateInvite(ctx, store.ActorCLI, t.ID, *email, *role)
	if err != nil {
		return err
	}
	out := struct {
		URL       string    `json:"url"`
		Email     string    `json:"email"`
		Role      string    `json:"role"`
		ExpiresAt time.Time `json:"expires_at"`
	}{console.InviteURL(c.cfg.PublicURL, token), inv.Email, inv.Role, inv.ExpiresAt}
	return c.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "Send this link to %s to join %s as %s. It works once, until %s:\n  %s\n",
			out.Email, t.Name, out.Role, out.ExpiresAt.UTC().Format(time.RFC3339), out.URL)
	})
}

func newSetupLink(ctx context.Context, st *store.Store, publicURL string) (string, store.Invite, error) {
	token, inv, err := st.CreateSetupLink(ctx, store.ActorCLI)
	if err != nil {
		return "", store.Invite{}, err
	}
	return console.SetupURL(publicURL, token), inv, nil
}
