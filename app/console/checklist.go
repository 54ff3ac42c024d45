package console

import (
	"cmp"
	"context"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/views"
)

// A new team's next steps: an owner sees them on their own page (where setup
// lands) and on the dashboard until every one is done.

// routeWorks reports whether the gateway can forward on rt: it sends no
// credential (a local or mock upstream), or one of its upstreams' credential
// variables is set where the console runs, which is where the gateway runs.
// Otherwise every call on it is answered 503.
func (c *Console) routeWorks(rt store.Route) bool {
	if rt.CredentialHeader == "" {
		return true
	}
	if proxy.CredentialEnvAllowed(rt.CredentialEnv) && c.getenv(rt.CredentialEnv) != "" {
		return true
	}
	for _, tg := range rt.Targets {
		env := cmp.Or(tg.CredentialEnv, rt.CredentialEnv)
		if proxy.CredentialEnvAllowed(env) && c.getenv(env) != "" {
			return true
		}
	}
	return false
}

// checklist is the team's first steps, or nil once every one is done.
func (c *Console) checklist(ctx context.Context, teamID int64) (*views.Checklist, error) {
	routes, err := c.st.Routes(ctx, teamID)
	if err != nil {
		return nil, err
	}
	members, err := c.st.Members(ctx, teamID)
	if err != nil {
		return nil, err
	}
	invites, err := c.st.PendingInvites(ctx, teamID)
	if err != nil {
		return nil, err
	}
	calls, err := c.st.Ledger(ctx, teamID, nil, time.Now().Add(-recentWindow), 1)
	if err != nil {
		return nil, err
	}
	called := len(calls) > 0
	if lt, ok := c.readLive(ctx, teamID); ok && !called {
		for _, m := range lt.Members {
			called = called || !m.LastSeen.IsZero()
		}
	}
	route := views.ChecklistStep{Label: "Add a provider route with its credential", URL: Prefix + "/routes",
		Hint: "Point a route at Anthropic, OpenAI or another upstream, with its API key set where the gateway runs."}
	for _, rt := range routes {
		if c.routeWorks(rt) {
			route.Done, route.Hint = true, "The route "+rt.Prefix+" forwards calls."
			break
		}
		route.Hint = "The route " + rt.Prefix + " answers 503 until $" + rt.CredentialEnv + " is set where the gateway runs."
	}
	invite := views.ChecklistStep{Label: "Invite someone", URL: Prefix + "/members#invite",
		Hint: "Make a one-time link for a teammate; you set their limits and budget later.", Done: len(members) > 1 || len(invites) > 0}
	call := views.ChecklistStep{Label: "Make a first call", URL: Prefix + "/#use-title", Done: called,
		Hint: "Create a key on Your keys and paste a snippet: the call shows on the dashboard within a second."}
	steps := []views.ChecklistStep{route, invite, call}
	for _, s := range steps {
		if !s.Done {
			return &views.Checklist{Steps: steps}, nil
		}
	}
	return nil, nil
}
