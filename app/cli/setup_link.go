package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

// setupLink is `tollgate admin setup-link`: a fresh one-time link that creates
// a team and its owner in the console. Run it again for each further team.
func setupLink(ctx context.Context, c *adminCmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	link, inv, err := newSetupLink(ctx, c.st, c.cfg.PublicURL)
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

// firstRunSetupLink returns a setup link while nobody can sign in to the
// console yet (a fresh database), for `make run` to print; "" afterwards, so
// every run does not mint a new link.
func firstRunSetupLink(ctx context.Context, st *store.Store, publicURL string) (string, error) {
	ok, err := st.AnyCanSignIn(ctx)
	if err != nil || ok {
		return "", err
	}
	link, _, err := newSetupLink(ctx, st, publicURL)
	return link, err
}

func newSetupLink(ctx context.Context, st *store.Store, publicURL string) (string, store.Invite, error) {
	token, inv, err := st.CreateSetupLink(ctx, store.ActorCLI)
	if err != nil {
		return "", store.Invite{}, err
	}
	return console.SetupURL(publicURL, token), inv, nil
}
