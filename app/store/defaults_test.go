package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// wantDefaults fails unless member m of team is in the team's default tier
// and the team has the default team budget.
func (f *fixture) wantDefaults(t *testing.T, teamID int64, m store.Member) {
	t.Helper()
	ctx := t.Context()
	tier, err := f.st.DefaultTier(ctx, teamID)
	if err != nil || tier.Name != store.DefaultTierName || tier.Limits.RateLimit != 60 || tier.Limits.RatePeriod != time.Minute ||
		tier.Limits.TokensPerMinute != 100_000 || tier.Limits.Concurrency != 4 || tier.Limits.Budget == nil ||
		*tier.Limits.Budget != 20_000_000 || tier.Limits.BudgetPeriod != "monthly" {
		t.Fatalf("DefaultTier = %+v, %v; want 60/min, 100k TPM, 4 in flight, $20 a month", tier, err)
	}
	team := must(f.st.TeamLimits(ctx, teamID))(t)
	if team.Budget == nil || *team.Budget != store.DefaultTeamBudget || team.BudgetPeriod != "monthly" {
		t.Errorf("team limits %+v; want a $100 monthly budget", team)
	}
	e := must(f.st.EffectiveLimits(ctx, teamID, m.ID))(t)
	if e.Tier != store.DefaultTierName || e.Limits.RateLimit != 60 || e.Budget() == nil || *e.Budget() != 20_000_000 {
		t.Errorf("%s: effective %+v; want the default tier's limits", m.Email, e)
	}
	p := f.memberPolicy(t, m.ID)
	if p.Rate == nil || p.Rate.Limit != 60 || p.Concurrency != 4 || p.TokensPerMinute != 100_000 || p.Budget == nil {
		t.Errorf("%s: the snapshot enforces %+v; want the default tier's limits", m.Email, p)
	}
}

// TestNewTeamStartsLimited: a team made by the setup link or by CreateTeam has
// a default tier and a team budget, and whoever joins it (its first owner,
// members added, invites accepted, an invite made before the default changed)
// lands in the tier chosen for them, the default unless told otherwise.
func TestNewTeamStartsLimited(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx := t.Context()
	link := mustLink(t)(a.st.CreateSetupLink(ctx, store.ActorCLI))
	owner := must(a.st.CompleteSetup(ctx, link, "acme", "owner@acme.test", password))(t)
	a.wantDefaults(t, owner.TeamID, owner)

	team := must(a.st.CreateTeam(ctx, actor, "beta"))(t)
	added := must(a.st.AddMember(ctx, actor, team.ID, "ada@beta.test", store.RoleMember))(t)
	a.wantDefaults(t, team.ID, added)
	token, _ := must2(a.st.CreateInvite(ctx, actor, team.ID, "bo@beta.test", store.RoleMember))(t)
	invited := must(a.st.AcceptInvite(ctx, token, password))(t)
	a.wantDefaults(t, team.ID, invited)

	// Explicit choices: another tier, or none.
	must(a.st.CreateTier(ctx, actor, team.ID, store.Tier{Name: "core", Weight: 1, Limits: store.Limits{RateLimit: 5, RatePeriod: time.Second}}))(t)
	token, _ = must2(a.st.CreateInviteInTier(ctx, actor, team.ID, "cy@beta.test", store.RoleMember, "core"))(t)
	// Reissued, the link keeps its tier.
	token, _ = must2(a.st.ReissueInvite(ctx, actor, team.ID, "cy@beta.test"))(t)
	// A pending invite keeps the tier chosen when it was made.
	if err := a.st.SetDefaultTier(ctx, actor, team.ID, "core"); err != nil {
		t.Fatal(err)
	}
	pending, _ := must2(a.st.CreateInvite(ctx, actor, team.ID, "di@beta.test", store.RoleMember))(t)
	if err := a.st.SetDefaultTier(ctx, actor, team.ID, store.TierNone); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		member store.Member
		want   string
	}{
		{must(a.st.AcceptInvite(ctx, token, password))(t), "core"},
		{must(a.st.AcceptInvite(ctx, pending, password))(t), "core"},
		{must(a.st.AddMember(ctx, actor, team.ID, "ed@beta.test", store.RoleMember))(t), ""},
		{must(a.st.AddMemberInTier(ctx, actor, team.ID, "fi@beta.test", store.RoleMember, store.DefaultTierName))(t), store.DefaultTierName},
		{must(a.st.AddMemberInTier(ctx, actor, team.ID, "gu@beta.test", store.RoleMember, store.TierNone))(t), ""},
	} {
		if e := must(a.st.EffectiveLimits(ctx, team.ID, c.member.ID))(t); e.Tier != c.want {
			t.Errorf("%s is in tier %q, want %q", c.member.Email, e.Tier, c.want)
		}
	}
	if _, err := a.st.DefaultTier(ctx, team.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DefaultTier after choosing none = %v, want ErrNotFound", err)
	}

	a.refused(t, "UnknownTier", "tier", func() error {
		_, err := a.st.AddMemberInTier(ctx, actor, team.ID, "ho@beta.test", store.RoleMember, "gold")
		return err
	})
	a.refused(t, "UnknownInviteTier", "tier", func() error {
		_, _, err := a.st.CreateInviteInTier(ctx, actor, team.ID, "ho@beta.test", store.RoleMember, "gold")
		return err
	})
	a.refused(t, "TierNamedNone", "name", func() error {
		_, err := a.st.CreateTier(ctx, actor, team.ID, store.NewTier(store.TierNone))
		return err
	})
}
