package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

const owner = store.ActorCLI

func dollars(d int64) *int64 { return new(d * 1_000_000) }

// memberPolicy is what the replicas enforce for the member, from a fresh snapshot.
func (f *fixture) memberPolicy(t *testing.T, memberID int64) limiter.Policy {
	t.Helper()
	m, ok := f.snapshot(t).Member(memberID)
	if !ok {
		t.Fatalf("member %d not in the snapshot", memberID)
	}
	return m.Limits
}

func TestTierLimitsWithMemberOverrides(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	must(f.st.CreateTier(ctx, owner, f.team.ID, store.Tier{Name: "intern", Weight: 1, Limits: store.Limits{RateLimit: 10,
		RatePeriod: time.Minute, Concurrency: 2, TokensPerMinute: 1000, Budget: dollars(5), BudgetPeriod: "daily"}}))(t)
	// Own limits set before the tier was assigned stay, as overrides.
	must(f.st.SetMemberLimits(ctx, owner, f.team.ID, f.member.ID, store.Limits{Concurrency: 7, RatePeriod: time.Second}))(t)
	if p := f.memberPolicy(t, f.member.ID); p.Concurrency != 7 || p.Rate != nil || p.Budget != nil {
		t.Fatalf("before the tier: %+v; want only the member's own concurrency 7", p)
	}
	must(f.st.AssignTier(ctx, owner, f.team.ID, f.member.ID, "intern"))(t)
	p := f.memberPolicy(t, f.member.ID)
	if p.Concurrency != 7 || p.TokensPerMinute != 1000 || p.Rate == nil || p.Rate.Limit != 10 || p.Rate.Period != time.Minute ||
		p.Budget == nil || p.Budget.Limit != 5_000_000 || p.Budget.Period != limiter.PeriodDaily {
		t.Fatalf("in the tier: %+v (rate %+v, budget %+v); want the tier's limits with the member's concurrency", p, p.Rate, p.Budget)
	}
	// Changing the tier changes its members; the override still wins.
	must(f.st.ChangeTier(ctx, owner, f.team.ID, "intern", func(tr store.Tier) store.Tier {
		tr.Limits.Concurrency, tr.Limits.TokensPerMinute = 1, 500
		return tr
	}))(t)
	if p := f.memberPolicy(t, f.member.ID); p.Concurrency != 7 || p.TokensPerMinute != 500 {
		t.Fatalf("after the tier change: %+v; want concurrency 7 (override) and 500 tokens/min (tier)", p)
	}
	// Removing the override (0) gives the tier's value back.
	must(f.st.SetMemberLimits(ctx, owner, f.team.ID, f.member.ID, store.NoLimits()))(t)
	if p := f.memberPolicy(t, f.member.ID); p.Concurrency != 1 {
		t.Fatalf("without the override: concurrency %d; want the tier's 1", p.Concurrency)
	}
	e := must(f.st.EffectiveLimits(ctx, f.team.ID, f.member.ID))(t)
	if e.Tier != "intern" || e.Limits.Concurrency != 1 || *e.Budget() != 5_000_000 {
		t.Fatalf("EffectiveLimits = %+v", e)
	}
	// A tier with members cannot be deleted; out of it, the member has their own limits only.
	var state *store.StateError
	if err := f.st.DeleteTier(ctx, owner, f.team.ID, "intern"); !errors.As(err, &state) {
		t.Fatalf("DeleteTier with a member = %v; want a StateError", err)
	}
	must(f.st.AssignTier(ctx, owner, f.team.ID, f.member.ID, ""))(t)
	if err := f.st.DeleteTier(ctx, owner, f.team.ID, "intern"); err != nil {
		t.Fatal(err)
	}
	if p := f.memberPolicy(t, f.member.ID); p != (limiter.Policy{}) {
		t.Fatalf("out of the tier: %+v; want no limits", p)
	}
}

func TestTierRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	other := must(f.st.CreateTeam(ctx, owner, "other"))(t)
	must(f.st.CreateTier(ctx, owner, other.ID, store.NewTier("theirs")))(t)
	var v *store.ValidationError
	for name, tr := range map[string]store.Tier{
		"BadName":     {Name: "Core\u202e", Weight: 1},
		"ZeroWeight":  {Name: "core", Weight: 0},
		"HugeWeight":  {Name: "core", Weight: store.MaxTierWeight + 1},
		"HugeBudget":  {Name: "core", Weight: 1, Limits: store.Limits{Budget: new(int64(1 << 60))}},
		"NegativeAAC": {Name: "core", Weight: 1, AutoApprove: -1},
	} {
		if _, err := f.st.CreateTier(ctx, owner, f.team.ID, tr); !errors.As(err, &v) {
			t.Errorf("%s: CreateTier = %v; want a ValidationError", name, err)
		}
	}
	// Another team's tier is not found from this one.
	if _, err := f.st.AssignTier(ctx, owner, f.team.ID, f.member.ID, "theirs"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AssignTier(another team's tier) = %v; want ErrNotFound", err)
	}
	must(f.st.CreateTier(ctx, owner, f.team.ID, store.NewTier("core")))(t)
	if _, err := f.st.CreateTier(ctx, owner, f.team.ID, store.NewTier("core")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateTier(twice) = %v; want ErrConflict", err)
	}
}

// budgetFixture is a member in a tier with a $10 monthly budget.
func budgetFixture(t *testing.T, autoApprove int64) *fixture {
	f := setup(t)
	must(f.st.CreateTier(t.Context(), owner, f.team.ID, store.Tier{Name: "core", Weight: 1, AutoApprove: autoApprove,
		Limits: store.Limits{Budget: dollars(10)}}))(t)
	must(f.st.AssignTier(t.Context(), owner, f.team.ID, f.member.ID, "core"))(t)
	return f
}

func (f *fixture) budget(t *testing.T) int64 {
	t.Helper()
	p := f.memberPolicy(t, f.member.ID)
	if p.Budget == nil {
		t.Fatal("no budget in the snapshot")
	}
	return p.Budget.Limit
}

func TestBudgetRequestApproveDecline(t *testing.T) {
	t.Parallel()
	f := budgetFixture(t, 0)
	ctx := t.Context()
	me := store.MemberActor(f.member.ID)
	asked := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 20_000_001, "  eval run for the paper "))(t)
	if asked.Status != store.RequestPending || asked.Reason != "eval run for the paper" {
		t.Fatalf("request = %+v; want pending, reason trimmed", asked)
	}
	if got := f.budget(t); got != 10_000_000 {
		t.Fatalf("pending: budget %d; want 10000000 unchanged", got)
	}
	pending := must(f.st.PendingBudgetRequests(ctx, f.team.ID))(t)
	if len(pending) != 1 || pending[0].Email != f.member.Email {
		t.Fatalf("pending = %+v", pending)
	}
	// The member cannot decide their own request.
	if _, err := f.st.ApproveBudgetRequest(ctx, me, f.team.ID, asked.ID, ""); !errors.As(err, new(*store.ForbiddenError)) {
		t.Fatalf("self-approval = %v; want refused", err)
	}
	got := must(f.st.ApproveBudgetRequest(ctx, owner, f.team.ID, asked.ID, "ok"))(t)
	if got.Status != store.RequestApproved || got.Period != "monthly" || got.PeriodStart == nil {
		t.Fatalf("approved = %+v", got)
	}
	if got := f.budget(t); got != 30_000_001 {
		t.Fatalf("approved: budget %d; want exactly 10000000 + 20000001", got)
	}
	if e := must(f.st.EffectiveLimits(ctx, f.team.ID, f.member.ID))(t); e.Granted != 20_000_001 {
		t.Fatalf("EffectiveLimits granted %d", e.Granted)
	}
	// The dashboard and `admin list members` show what binds: the tier's budget and the grant.
	if l := must(f.st.TeamMemberLimits(ctx, f.team.ID))(t)[f.member.ID]; l.Budget == nil || *l.Budget != 30_000_001 {
		t.Fatalf("TeamMemberLimits = %+v; want the tier's budget raised by the grant", l)
	}
	// Decided once: neither a second approval nor a decline changes it.
	var state *store.StateError
	if _, err := f.st.ApproveBudgetRequest(ctx, owner, f.team.ID, asked.ID, ""); !errors.As(err, &state) {
		t.Fatalf("second approval = %v; want a StateError", err)
	}
	second := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 5_000_000, "more"))(t)
	declined := must(f.st.DeclineBudgetRequest(ctx, owner, f.team.ID, second.ID, "not this month"))(t)
	if declined.Status != store.RequestDeclined || declined.Note != "not this month" {
		t.Fatalf("declined = %+v", declined)
	}
	if got := f.budget(t); got != 30_000_001 {
		t.Fatalf("after a decline: budget %d; want 30000001", got)
	}
	mine := must(f.st.MemberBudgetRequests(ctx, f.team.ID, f.member.ID, 10))(t)
	if len(mine) != 2 || mine[0].Status != store.RequestDeclined || mine[1].Status != store.RequestApproved {
		t.Fatalf("member's requests = %+v", mine)
	}
	// Another team's owner cannot decide this team's request.
	other := must(f.st.CreateTeam(ctx, owner, "other"))(t)
	third := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 1, "x"))(t)
	if _, err := f.st.ApproveBudgetRequest(ctx, owner, other.ID, third.ID, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approval from another team = %v; want ErrNotFound", err)
	}
}

func TestBudgetRequestRefusals(t *testing.T) {
	t.Parallel()
	f := budgetFixture(t, 0)
	ctx := t.Context()
	me := store.MemberActor(f.member.ID)
	var v *store.ValidationError
	for name, c := range map[string]struct {
		amount int64
		reason string
	}{
		"Zero":      {0, "x"},
		"Negative":  {-1, "x"},
		"TooMuch":   {store.MaxBudgetRequest + 1, "x"},
		"NoReason":  {1, "   "},
		"Control":   {1, "eval\x1b[2Jrun"},
		"Bidi":      {1, "eval \u202erun"},
		"NotUTF8":   {1, "eval \xff"},
		"LongStory": {1, strings.Repeat("a", 501)},
	} {
		if _, err := f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, c.amount, c.reason); !errors.As(err, &v) {
			t.Errorf("%s: RequestBudget = %v; want a ValidationError", name, err)
		}
	}
	asked := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 1, "x"))(t)
	if _, err := f.st.DeclineBudgetRequest(ctx, owner, f.team.ID, asked.ID, "no\x07"); !errors.As(err, &v) {
		t.Errorf("decline with a control character in the note = %v; want a ValidationError", err)
	}
	for range store.MaxPendingRequests - 1 {
		must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 1, "x"))(t)
	}
	var state *store.StateError
	if _, err := f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 1, "x"); !errors.As(err, &state) {
		t.Errorf("request past the pending cap = %v; want a StateError", err)
	}
	// A member without a budget has nothing to raise.
	bob := must(f.st.AddMemberInTier(ctx, owner, f.team.ID, "bob@example.com", store.RoleMember, store.TierNone))(t)
	if _, err := f.st.RequestBudget(ctx, store.MemberActor(bob.ID), f.team.ID, bob.ID, 1, "x"); !errors.As(err, &v) {
		t.Errorf("request without a budget = %v; want a ValidationError", err)
	}
}

func TestBudgetAutoApproveCeiling(t *testing.T) {
	t.Parallel()
	f := budgetFixture(t, 5_000_000)
	ctx := t.Context()
	me := store.MemberActor(f.member.ID)
	first := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 3_000_000, "x"))(t)
	if first.Status != store.RequestApproved || !first.AutoApproved || first.DecidedBy != "auto:tier:core" {
		t.Fatalf("within the ceiling: %+v; want auto-approved", first)
	}
	// 3 + 2 = 5: at the ceiling, still approved; one micro-dollar more waits.
	if r := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 2_000_000, "x"))(t); !r.AutoApproved {
		t.Fatalf("at the ceiling: %+v; want auto-approved", r)
	}
	if r := must(f.st.RequestBudget(ctx, me, f.team.ID, f.member.ID, 1, "x"))(t); r.Status != store.RequestPending {
		t.Fatalf("past the ceiling: %+v; want pending", r)
	}
	if got := f.budget(t); got != 15_000_000 {
		t.Fatalf("budget %d; want 10 + 3 + 2 dollars", got)
	}
	entries := must(f.st.AuditFiltered(ctx, store.AuditFilter{TeamID: &f.team.ID, Action: store.ActionBudgetAutoApprove, Limit: 10}))(t)
	if len(entries) != 2 || entries[0].Actor != "auto:tier:core" {
		t.Fatalf("auto-approvals audited: %+v", entries)
	}
}

// TestGrantOnlyInItsPeriod: a grant of last month adds nothing this month,
// and a grant of a monthly period adds nothing once the budget is daily.
func TestGrantOnlyInItsPeriod(t *testing.T) {
	t.Parallel()
	url := dbtest.Schema(t)
	pool := dbtest.Pool(t, url)
	f := &fixture{st: store.New(pool)}
	ctx := t.Context()
	f.team = must(f.st.CreateTeam(ctx, owner, "acme"))(t)
	f.member = must(f.st.AddMember(ctx, owner, f.team.ID, "alice@example.com", store.RoleMember))(t)
	must(f.st.SetMemberLimits(ctx, owner, f.team.ID, f.member.ID, store.Limits{Budget: dollars(10), RatePeriod: time.Second}))(t)
	asked := must(f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 7_000_000, "x"))(t)
	must(f.st.ApproveBudgetRequest(ctx, owner, f.team.ID, asked.ID, ""))(t)
	if got := f.budget(t); got != 17_000_000 {
		t.Fatalf("this month: budget %d; want 17000000", got)
	}
	// As if it had been approved last month.
	if _, err := pool.Exec(ctx, `UPDATE budget_request SET period_start = period_start - interval '1 month' WHERE id = $1`, asked.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.budget(t); got != 10_000_000 {
		t.Fatalf("last month's grant: budget %d; want 10000000", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE budget_request SET period_start = period_start + interval '1 month' WHERE id = $1`, asked.ID); err != nil {
		t.Fatal(err)
	}
	must(f.st.SetMemberLimits(ctx, owner, f.team.ID, f.member.ID, store.Limits{Budget: dollars(10), BudgetPeriod: "daily", RatePeriod: time.Second}))(t)
	if got := f.budget(t); got != 10_000_000 {
		t.Fatalf("monthly grant, daily budget: %d; want 10000000", got)
	}
	// A daily grant counts today only: yesterday's is within the snapshot's
	// window of recent grants, and must still add nothing.
	if _, err := pool.Exec(ctx, `UPDATE budget_request SET budget_period = 'daily', period_start = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' WHERE id = $1`, asked.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.budget(t); got != 17_000_000 {
		t.Fatalf("today's daily grant: budget %d; want 17000000", got)
	}
	if _, err := pool.Exec(ctx, `UPDATE budget_request SET period_start = period_start - interval '1 day' WHERE id = $1`, asked.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.budget(t); got != 10_000_000 {
		t.Fatalf("yesterday's daily grant: budget %d; want 10000000", got)
	}
}

// TestConcurrentApprovals: owners approving one request at once grant it once.
func TestConcurrentApprovals(t *testing.T) {
	t.Parallel()
	f := budgetFixture(t, 0)
	ctx := t.Context()
	asked := must(f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 4_000_000, "x"))(t)
	errs := f.race(t, func(i int) error {
		_, err := f.st.ApproveBudgetRequest(ctx, owner, f.team.ID, asked.ID, "")
		return err
	})
	oneWinner(t, "approve", errs, func(int) string { return "already approved" })
	if got := f.budget(t); got != 14_000_000 {
		t.Fatalf("budget %d after racing approvals; want 14000000 (granted once)", got)
	}
	entries := must(f.st.AuditFiltered(ctx, store.AuditFilter{TeamID: &f.team.ID, Action: store.ActionBudgetApprove, Limit: 100}))(t)
	if len(entries) != 1 {
		t.Fatalf("%d approvals audited; want 1", len(entries))
	}
}

// TestTierWeightInSnapshot: the snapshot carries a member's weight in the
// waiting room from their tier, changes with it, and is 1 out of any tier.
func TestTierWeightInSnapshot(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	weight := func() int64 {
		t.Helper()
		m, ok := f.snapshot(t).Member(f.member.ID)
		if !ok {
			t.Fatalf("member %d not in the snapshot", f.member.ID)
		}
		return m.Weight
	}
	if w := weight(); w != 1 {
		t.Fatalf("out of any tier: weight %d, want 1", w)
	}
	must(f.st.CreateTier(ctx, owner, f.team.ID, store.Tier{Name: "core", Weight: 8, Limits: store.NoLimits()}))(t)
	must(f.st.AssignTier(ctx, owner, f.team.ID, f.member.ID, "core"))(t)
	if w := weight(); w != 8 {
		t.Fatalf("in tier core: weight %d, want 8", w)
	}
	must(f.st.ChangeTier(ctx, owner, f.team.ID, "core", func(tr store.Tier) store.Tier { tr.Weight = 3; return tr }))(t)
	if w := weight(); w != 3 {
		t.Fatalf("after the tier change: weight %d, want 3", w)
	}
}
