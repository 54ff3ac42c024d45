package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestOwnerManagesTiers: an owner makes a tier, sets its limits, and puts a
// member in it from the member's page; a member can do none of it.
func TestOwnerManagesTiers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	ctx := t.Context()

	wantRedirect(t, "create tier", owner.post("/console/tiers", url.Values{"name": {"intern"}}), "/console/tiers/intern")
	wantStatus(t, "hostile tier name", owner.post("/console/tiers", url.Values{"name": {"in\u202etern"}}), http.StatusUnprocessableEntity)
	form := limitsForm("rate", "10", "period", "1m", "budget", "5", "confirm", "yes")
	form.Set("weight", "3")
	form.Set("auto_approve", "2.50")
	wantRedirect(t, "set tier", owner.post("/console/tiers/intern", form), "/console/tiers/intern")
	tr, err := e.st.FindTier(ctx, o.TeamID, "intern")
	if err != nil || tr.Limits.RateLimit != 10 || tr.Limits.RatePeriod != time.Minute || *tr.Limits.Budget != 5_000_000 ||
		tr.Weight != 3 || tr.AutoApprove != 2_500_000 {
		t.Fatalf("tier = %+v, %v", tr, err)
	}
	form.Set("weight", "0")
	wantStatus(t, "weight 0", owner.post("/console/tiers/intern", form), http.StatusUnprocessableEntity)
	if page := owner.get("/console/tiers"); !page.has("tier-row") || !strings.Contains(page.text("tiers"), "intern") {
		t.Fatalf("tiers page lists no tier")
	}

	memberPage := "/console/members/" + strconv.FormatInt(a.ID, 10)
	if page := owner.get(memberPage); !page.has("tier-assign") {
		t.Fatal("member page has no tier picker")
	}
	wantRedirect(t, "assign", owner.post(memberPage+"/tier", url.Values{"tier": {"intern"}}), memberPage+"#tier")
	eff, err := e.st.EffectiveLimits(ctx, o.TeamID, a.ID)
	if err != nil || eff.Tier != "intern" || eff.Limits.RateLimit != 10 {
		t.Fatalf("effective = %+v, %v", eff, err)
	}
	// A forged field is refused, and members cannot reach any of it.
	wantStatus(t, "forged field", owner.post(memberPage+"/tier", url.Values{"tier": {"intern"}, "member_id": {"1"}}), http.StatusBadRequest)
	before := e.auditCount()
	for _, p := range []string{"/console/tiers", "/console/tiers/intern", "/console/tiers/intern/delete", memberPage + "/tier"} {
		wantStatus(t, "member posts "+p, ada.post(p, form), http.StatusForbidden)
	}
	if e.auditCount() != before {
		t.Error("a member's refused posts wrote audit rows")
	}
	wantStatus(t, "delete a tier with members", owner.post("/console/tiers/intern/delete", url.Values{}), http.StatusConflict)
}

// TestBudgetRequestThroughTheConsole: a member asks from their page, an
// owner sees it on the dashboard and approves, the member sees the answer;
// a member cannot approve (their own or any) request, nor an owner their own.
func TestBudgetRequestThroughTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	ctx := t.Context()
	budget := int64(10_000_000)
	for _, id := range []int64{a.ID, o.ID} {
		if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, id, store.Limits{RatePeriod: time.Second, Budget: &budget}); err != nil {
			t.Fatal(err)
		}
	}
	if !ada.get("/console/").has("budget-ask") {
		t.Fatal("the member's page has no budget request form")
	}
	// Validated: no amount, hostile text, and fields the form does not have.
	wantStatus(t, "no amount", ada.post("/console/budget-requests", url.Values{"amount": {""}, "reason": {"x"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "escape in reason", ada.post("/console/budget-requests", url.Values{"amount": {"20"}, "reason": {"\x1b[2J"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "forged member", ada.post("/console/budget-requests", url.Values{"amount": {"20"}, "reason": {"x"}, "member_id": {strconv.FormatInt(o.ID, 10)}}), http.StatusBadRequest)

	wantRedirect(t, "ask", ada.post("/console/budget-requests", url.Values{"amount": {"20.00"}, "reason": {"eval run for the paper"}}), "/console/#budget-requests")
	pending, err := e.st.PendingBudgetRequests(ctx, o.TeamID)
	if err != nil || len(pending) != 1 || pending[0].MemberID != a.ID || pending[0].Amount != 20_000_000 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	dash := owner.get("/console/dashboard")
	if !strings.Contains(dash.text("pending-requests"), "eval run for the paper") {
		t.Fatalf("dashboard shows no pending request: %q", dash.text("pending-requests"))
	}
	approve := "/console/budget-requests/" + strconv.FormatInt(pending[0].ID, 10) + "/approve"
	wantStatus(t, "member approves", ada.post(approve, url.Values{}), http.StatusForbidden)
	wantRedirect(t, "owner approves", owner.post(approve, url.Values{"note": {"go ahead"}}), "/console/dashboard#pending-requests")
	wantStatus(t, "approve twice", owner.post(approve, url.Values{}), http.StatusConflict)
	eff, err := e.st.EffectiveLimits(ctx, o.TeamID, a.ID)
	if err != nil || eff.Granted != 20_000_000 {
		t.Fatalf("granted = %+v, %v", eff, err)
	}
	if answer := ada.get("/console/").text("budget-ask"); !strings.Contains(answer, "approved") || !strings.Contains(answer, "go ahead") {
		t.Fatalf("the member does not see the answer: %q", answer)
	}
	// Their page counts the grant in the budget: $10 + $20.
	if usage := ada.get("/console/").text("usage-section"); !strings.Contains(usage, "$30.00") {
		t.Fatalf("the member's usage does not show the raised budget: %q", usage)
	}

	// An owner's own request waits for another owner.
	wantRedirect(t, "owner asks", owner.post("/console/budget-requests", url.Values{"amount": {"5"}, "reason": {"demo"}}), "/console/#budget-requests")
	mine, err := e.st.MemberBudgetRequests(ctx, o.TeamID, o.ID, 1)
	if err != nil || len(mine) != 1 {
		t.Fatal(mine, err)
	}
	own := "/console/budget-requests/" + strconv.FormatInt(mine[0].ID, 10) + "/approve"
	wantStatus(t, "owner approves own", owner.post(own, url.Values{}), http.StatusForbidden)
	decline := "/console/budget-requests/" + strconv.FormatInt(mine[0].ID, 10) + "/decline"
	wantStatus(t, "owner declines own", owner.post(decline, url.Values{"note": {"x"}}), http.StatusForbidden)
}
