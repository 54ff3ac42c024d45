package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
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
	defaults, err := c.defaultsForm(ctx, teamID)
	if err != nil {
		return nil, err
	}
	steps := []views.ChecklistStep{route, invite, call}
	done := defaults.Done
	for _, s := range steps {
		done = done && s.Done
	}
	if done {
		return nil, nil
	}
	return &views.Checklist{Defaults: defaults, Steps: steps}, nil
}

// defaultsForm is the checklist's first step as stored: the default tier's
// limits and the team budget.
func (c *Console) defaultsForm(ctx context.Context, teamID int64) (views.DefaultsForm, error) {
	var f views.DefaultsForm
	team, err := c.st.TeamLimits(ctx, teamID)
	if err != nil {
		return f, err
	}
	if team.Budget != nil {
		f.TeamBudget = store.FormatDollars(*team.Budget)
	}
	tier, err := c.st.DefaultTier(ctx, teamID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return f, nil
	case err != nil:
		return f, err
	}
	l := limitsForm(tier.Limits)
	f.Tier, f.Rate, f.Period, f.TPM, f.Concurrency, f.Budget = tier.Name, l.Rate, l.Period, l.TPM, l.Concurrency, l.Budget
	f.Done = tier.Limits.Budget != nil && team.Budget != nil
	return f, nil
}

// setDefaults saves the checklist's limits form: the default tier's limits
// (made, as "default", if the team has none) and the team budget.
func (c *Console) setDefaults(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "rate", "period", "tpm", "concurrency", "budget", "team_budget")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	msg, err := c.saveDefaults(ctx, v, form)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if msg == "" && !isHTMX(r) {
		http.Redirect(w, r, Prefix+"/dashboard#defaults", http.StatusSeeOther)
		return
	}
	f := views.DefaultsForm{Error: msg, Saved: msg == ""}
	if msg == "" {
		if f, err = c.defaultsForm(ctx, v.team.ID); err != nil {
			c.fail(w, r, err)
			return
		}
		f.Saved = true
	} else {
		// Refilled as posted, so the lead corrects what was refused.
		f.Rate, f.Period, f.TPM, f.Concurrency = form.Get("rate"), form.Get("period"), form.Get("tpm"), form.Get("concurrency")
		f.Budget, f.TeamBudget = form.Get("budget"), form.Get("team_budget")
		if t, err := c.st.DefaultTier(ctx, v.team.ID); err == nil {
			f.Tier = t.Name
		}
	}
	status := http.StatusOK
	if msg != "" {
		status = http.StatusUnprocessableEntity
	}
	if isHTMX(r) {
		c.render(w, r, status, views.DefaultsStep(f))
		return
	}
	checklist, err := c.checklist(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if checklist == nil {
		checklist = &views.Checklist{}
	}
	checklist.Defaults = f
	c.render(w, r, status, views.DashboardPage(views.Dashboard{Nav: nav(v, views.TabDashboard), Checklist: checklist,
		StreamURL: Prefix + "/dashboard/live", StaleAfter: c.staleAfter()}))
}

// saveDefaults applies the posted form; a refusal is returned as the message
// the form shows.
func (c *Console) saveDefaults(ctx context.Context, v *viewer, form url.Values) (string, error) {
	posted, msg := parseLimits(form)
	if msg != "" {
		return msg, nil
	}
	if strings.TrimSpace(form.Get("period")) == "" {
		posted.RatePeriod = time.Minute // the form's placeholder, as the defaults are stated
	}
	var teamBudget *int64
	if s := strings.TrimSpace(form.Get("team_budget")); !blank(s) {
		micros, err := store.ParseDollars(s)
		if err != nil {
			return "Team budget: " + err.Error() + ".", nil
		}
		teamBudget = &micros
	}
	tier, err := c.st.DefaultTier(ctx, v.team.ID)
	if errors.Is(err, store.ErrNotFound) {
		if tier, err = c.st.CreateTier(ctx, v.actor(), v.team.ID, store.NewTier(store.DefaultTierName)); err == nil {
			err = c.st.SetDefaultTier(ctx, v.actor(), v.team.ID, tier.Name)
		}
	}
	if msg := validation(err); msg != "" {
		return msg, nil
	} else if err != nil {
		return "", err
	}
	// The kinds the form does not show (algorithm, burst, budget period) stay as they are.
	_, err = c.st.ChangeTier(ctx, v.actor(), v.team.ID, tier.Name, func(t store.Tier) store.Tier {
		if t.Limits.RateLimit = posted.RateLimit; posted.RateLimit > 0 {
			t.Limits.RatePeriod = posted.RatePeriod
		}
		if posted.RateLimit == 0 {
			t.Limits.RateBurst = 0
		}
		t.Limits.TokensPerMinute, t.Limits.Concurrency, t.Limits.Budget = posted.TokensPerMinute, posted.Concurrency, posted.Budget
		return t
	})
	if msg := validation(err); msg != "" || err != nil {
		return msg, err
	}
	_, err = c.st.ChangeTeamLimits(ctx, v.actor(), v.team.ID, func(l store.Limits) store.Limits { l.Budget = teamBudget; return l })
	if msg := validation(err); msg != "" {
		return msg, nil
	}
	return "", err
}
