package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// TestMemberSeesOwnUsageOnly: a member's page shows their live usage, budget
// left and when it resets, and their recent requests from the ledger, and
// nothing of anyone else's.
func TestMemberSeesOwnUsageOnly(t *testing.T) {
	t.Parallel()
	stats := live.New(nil, live.Options{})
	e := newEnv(t, withLive(stats))
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	_, b := e.invite(owner, "bob@acme.test")
	ctx := t.Context()
	budget := int64(10_000_000)
	if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, a.ID, store.Limits{Budget: &budget, BudgetPeriod: "daily",
		RateLimit: 60, RatePeriod: time.Minute}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	entry := func(member int64, id, model string, cost int64) proxy.LedgerEntry {
		return proxy.LedgerEntry{TeamID: o.TeamID, MemberID: member, KeyID: "k", RequestID: id, Model: model,
			Status: proxy.LedgerSettled, HTTPStatus: 200, CostMicros: cost, HeldMicros: cost, CreatedAt: now, SettledAt: now,
			Usage: usage.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 5}}
	}
	if err := e.st.WriteLedger(ctx, []proxy.LedgerEntry{entry(a.ID, "r1", "claude-ada-model", 2_500_000),
		entry(b.ID, "r2", "bobs-secret-model", 7_000_000)}); err != nil {
		t.Fatal(err)
	}
	call(stats, o.TeamID, a.ID, 200, 2_500_000)
	call(stats, o.TeamID, a.ID, 429, 0)
	call(stats, o.TeamID, b.ID, 200, 7_000_000)
	call(stats, o.TeamID, b.ID, 200, 0)
	call(stats, o.TeamID, b.ID, 200, 0)

	home := ada.get("/console/")
	wantStatus(t, "member page", home, http.StatusOK)
	if home.text("usage-requests") != "2" || home.text("usage-429") != "1" || home.text("usage-tokens") != "15" {
		t.Errorf("ada's live usage: %q requests, %q 429s, %q tokens", home.text("usage-requests"), home.text("usage-429"), home.text("usage-tokens"))
	}
	tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Format("2006-01-02 15:04 UTC")
	if got := strings.Join(strings.Fields(home.text("budget-remaining")), " "); got != "$7.50 left today. It resets at "+tomorrow+"." {
		t.Errorf("budget remaining: %q", got)
	}
	rows := home.doc.Find(`[data-testid="recent-request"]`)
	if rows.Length() != 1 || !strings.Contains(rows.Text(), "claude-ada-model") || !strings.Contains(rows.Text(), "1200") ||
		!strings.Contains(rows.Text(), "$2.50") || !strings.Contains(rows.Text(), "200 settled") {
		t.Errorf("recent requests: %d rows: %q", rows.Length(), rows.Text())
	}
	if home.doc.Find(`[data-testid="usage-stream"][sse-connect="/console/usage/live"]`).Length() != 1 {
		t.Error("the usage section is not live")
	}
	for _, leak := range []string{"bob@acme.test", "bobs-secret-model", "$7.00"} {
		if strings.Contains(home.body, leak) {
			t.Errorf("ada's page shows %q", leak)
		}
	}

	// The owner's members page fills in each member's figures.
	members := owner.get("/console/members")
	cells := members.doc.Find(`[data-testid="member-row"][data-email="bob@acme.test"] [data-testid="usage"]`)
	if got := texts(cells); got != "3 0 $7.00" {
		t.Errorf("bob's usage cells: %q, want 3, 0 and $7.00", got)
	}
	cells = members.doc.Find(`[data-testid="member-row"][data-email="ada@acme.test"] [data-testid="usage"]`)
	if got := texts(cells); got != "2 1 $2.50 of $10.00" {
		t.Errorf("ada's usage cells: %q", got)
	}

	// Over the team's budget, a member is told why they get 402s.
	teamBudget := int64(1_000_000)
	if _, err := e.st.SetTeamLimits(ctx, store.ActorCLI, o.TeamID, store.Limits{Budget: &teamBudget, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if r := ada.get("/console/"); !strings.Contains(r.text("team-budget"), "team's budget is used up") {
		t.Errorf("team budget notice: %q", r.text("team-budget"))
	}
}
