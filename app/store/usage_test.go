package store_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

func TestTeamMemberLimitsIsScopedToTheTeam(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	other := must(f.st.CreateTeam(ctx, actor, "other"))(t)
	stranger := must(f.st.AddMember(ctx, actor, other.ID, "eve@example.com", store.RoleMember))(t)
	budget := int64(5_000_000)
	want := store.Limits{RateLimit: 10, RatePeriod: time.Second, Budget: &budget, BudgetPeriod: "daily"}
	must(f.st.SetMemberLimits(ctx, actor, f.team.ID, f.member.ID, want))(t)
	must(f.st.SetMemberLimits(ctx, actor, other.ID, stranger.ID, want))(t)

	got := must(f.st.TeamMemberLimits(ctx, f.team.ID))(t)
	if len(got) != 1 {
		t.Fatalf("limits of %d members, want 1 (the team's own)", len(got))
	}
	l := got[f.member.ID]
	if l.RateLimit != 10 || l.Budget == nil || *l.Budget != budget || l.BudgetPeriod != "daily" {
		t.Errorf("limits = %+v", l)
	}
}

func TestPeriods(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", -5*3600)) // 2027-01-01 04:59:59 UTC
	for _, c := range []struct {
		period     string
		start, end time.Time
		resets     bool
	}{
		{"daily", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC), true},
		{"monthly", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), true},
		{"total", time.Unix(0, 0).UTC(), time.Time{}, false},
	} {
		if got := store.PeriodStart(c.period, now); !got.Equal(c.start) {
			t.Errorf("%s starts %v, want %v", c.period, got, c.start)
		}
		if got, ok := store.PeriodEnd(c.period, now); !got.Equal(c.end) || ok != c.resets {
			t.Errorf("%s ends %v (%v), want %v (%v)", c.period, got, ok, c.end, c.resets)
		}
	}
}
