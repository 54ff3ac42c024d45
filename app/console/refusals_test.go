package console_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// TestRefusalsAndTooSmallBudgetsAreExplained: a member with $0.001 left, less
// than one request's hold, is told so on their page and on the owner's view
// of them, with a red bar; their 402, 429 and 403 refusals are in their recent
// requests, and the dashboard counts them in its refusals column, badge and
// chart.
func TestRefusalsAndTooSmallBudgetsAreExplained(t *testing.T) {
	t.Parallel()
	stats := live.New(nil, live.Options{})
	e := newEnv(t, withLive(stats))
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	ctx := t.Context()
	budget := int64(1000) // $0.001
	if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, a.ID, store.Limits{Budget: &budget, BudgetPeriod: "monthly",
		RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	// An earlier request on a second model, which has not been refused yet.
	if err := e.st.WriteLedger(ctx, []proxy.LedgerEntry{{TeamID: o.TeamID, MemberID: a.ID, KeyID: "k", RequestID: "r1",
		Model: "claude-haiku-4-5", Status: proxy.LedgerReleased, HTTPStatus: 500, CreatedAt: now.Add(-time.Hour), SettledAt: now}}); err != nil {
		t.Fatal(err)
	}
	refuse := func(status int, code string, hold int64) {
		stats.Finished(proxy.Outcome{TeamID: o.TeamID, MemberID: a.ID, Status: status, Refusal: code, Model: "claude-sonnet-4-5",
			HeldMicros: hold, BudgetRemaining: budget})
	}
	refuse(http.StatusPaymentRequired, "budget", 250_000)
	refuse(http.StatusTooManyRequests, "rate", 0)
	refuse(http.StatusForbidden, "cut_off", 0)
	haiku, err := e.st.Price(ctx, "claude-haiku-4-5")
	if err != nil {
		t.Fatal(err)
	}
	haikuHold := "$" + store.FormatDollars(haiku.Estimate().Hold(1, haiku.MaxOutputTokens))

	for name, page := range map[string]response{"member's page": ada.get("/console/"),
		"owner's view": owner.get("/console/members/" + strconv.FormatInt(a.ID, 10))} {
		wantStatus(t, name, page, http.StatusOK)
		short := texts(page.doc.Find(`[data-testid="budget-short"]`))
		for _, want := range []string{"Requests on claude-sonnet-4-5 may cost up to $0.25; $0.001 left, so the gateway refuses them (402)",
			"Requests on claude-haiku-4-5 without max_tokens may cost up to " + haikuHold + "; $0.001 left"} {
			if !strings.Contains(short, want) {
				t.Errorf("%s: budget explanation %q lacks %q", name, short, want)
			}
		}
		if page.doc.Find(`[data-testid="usage-spend"] svg.bar.over`).Length() != 1 {
			t.Errorf("%s: the budget bar is not red while no request fits", name)
		}
		rows := texts(page.doc.Find(`[data-testid="recent-request"]`))
		for _, want := range []string{"402 refused: budget", "429 refused: rate limit", "403 refused: cut off", "$0 (needed $0.25)", "500 released"} {
			if !strings.Contains(rows, want) {
				t.Errorf("%s: recent requests %q lack %q", name, rows, want)
			}
		}
		if first := strings.TrimSpace(page.doc.Find(`[data-testid="recent-request"]`).First().Text()); !strings.Contains(first, "403 refused") {
			t.Errorf("%s: newest recent request %q, want the 403", name, first)
		}
	}

	dash := owner.get("/console/dashboard")
	wantStatus(t, "dashboard", dash, http.StatusOK)
	r := dash.doc.Find(`[data-testid="dashboard-row"][data-email="ada@acme.test"]`)
	if cell(r, "live-requests") != "3" || cell(r, "live-refused") != "3" || cell(r, "live-status") != "Budget too low" {
		t.Errorf("ada on the dashboard: %s requests, %s refused, status %q; want 3, 3, Budget too low",
			cell(r, "live-requests"), cell(r, "live-refused"), cell(r, "live-status"))
	}
	if got := dash.text("team-refused"); got != "3" {
		t.Errorf("team refused: %q, want 3", got)
	}
	if got := dash.doc.Find(`[data-testid="chart"] desc`).Text(); !strings.Contains(got, "3 requests refused") {
		t.Errorf("chart: %q, want the 3 refusals", got)
	}

	// With enough budget left for a request, nothing is explained away.
	budget = 10_000_000
	if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, a.ID, store.Limits{Budget: &budget, BudgetPeriod: "monthly",
		RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if page := ada.get("/console/"); page.has("budget-short") || page.doc.Find(`svg.bar.over`).Length() != 0 {
		t.Errorf("a budget that covers a request is explained as too small: %q", page.text("budget-short"))
	}
}
