package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func limitsForm(kv ...string) url.Values {
	f := url.Values{"algorithm": {"token_bucket"}, "rate": {""}, "period": {"1s"}, "burst": {""}, "tpm": {""},
		"concurrency": {""}, "budget": {""}, "budget_period": {"monthly"}}
	for i := 0; i < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func TestOwnerSetsMemberLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	path := "/console/members/" + strconv.FormatInt(a.ID, 10) + "/limits"
	ctx := t.Context()

	// The member page shows the form with the current (no) limits.
	page := owner.get("/console/members/" + strconv.FormatInt(a.ID, 10))
	if !page.has("limits-form") || page.doc.Find(`#budget`).AttrOr("value", "x") != "" || !page.has("usage-section") {
		t.Fatalf("member page: limits form %v, usage %v", page.has("limits-form"), page.has("usage-section"))
	}

	// Without JavaScript: a confirmation page first, which writes nothing.
	form := limitsForm("rate", "10", "period", "1m", "burst", "20", "tpm", "50000", "concurrency", "3",
		"budget", "12.345678", "budget_period", "daily")
	before := e.auditCount()
	r := owner.post(path, form)
	if r.status != http.StatusOK || !r.has("confirm") || e.auditCount() != before {
		t.Fatalf("unconfirmed limits: %d, confirm %v, audit +%d", r.status, r.has("confirm"), e.auditCount()-before)
	}
	if got := r.doc.Find(`[data-testid="confirm"] input[name="budget"]`).AttrOr("value", ""); got != "12.345678" {
		t.Errorf("the confirmation carries budget %q", got)
	}
	form.Set("confirm", "yes")
	wantRedirect(t, "confirmed limits", owner.post(path, form), "/console/members/"+strconv.FormatInt(a.ID, 10))
	l, err := e.st.MemberLimits(ctx, o.TeamID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.RateLimit != 10 || l.RatePeriod != time.Minute || l.RateBurst != 20 || l.TokensPerMinute != 50000 ||
		l.Concurrency != 3 || l.Budget == nil || *l.Budget != 12_345_678 || l.BudgetPeriod != "daily" {
		t.Errorf("saved limits = %+v", l)
	}
	if e.auditCount() != before+1 {
		t.Errorf("audit rows +%d, want 1", e.auditCount()-before)
	}

	// With HTMX: the section comes back, saved; blanks are "no limit".
	r = owner.htmx(path, limitsForm("confirm", "yes", "rate", "5", "algorithm", "sliding_window", "budget", "none"))
	if r.status != http.StatusOK || !r.has("limits-saved") || !strings.HasPrefix(r.body, `<section id="limits"`) {
		t.Fatalf("HTMX save: %d\n%.400s", r.status, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("a budget change is cacheable: %q", r.header.Get("Cache-Control"))
	}
	l, _ = e.st.MemberLimits(ctx, o.TeamID, a.ID)
	if l.RateLimit != 5 || l.RateAlgorithm != "sliding_window" || l.Budget != nil || l.TokensPerMinute != 0 || l.Concurrency != 0 {
		t.Errorf("limits after HTMX save = %+v", l)
	}

	// Refused forms come back with a message and the values as typed (422),
	// and change nothing.
	before = e.auditCount()
	for name, form := range map[string]url.Values{
		"rate not a number":     limitsForm("rate", "ten"),
		"rate zero":             limitsForm("rate", "0"),
		"budget finer than µ$":  limitsForm("budget", "1.0000001"),
		"negative budget":       limitsForm("budget", "-5"),
		"period not a duration": limitsForm("rate", "1", "period", "soon"),
		"burst with a window":   limitsForm("rate", "1", "algorithm", "sliding_window", "burst", "4"),
		"unknown algorithm":     limitsForm("algorithm", "leaky"),
		"unknown period":        limitsForm("budget_period", "weekly"),
	} {
		for _, htmx := range []bool{false, true} {
			form.Set("confirm", "yes")
			r := owner.post(path, form)
			if htmx {
				r = owner.htmx(path, form)
			}
			if r.status != http.StatusUnprocessableEntity || r.text("form-error") == "" {
				t.Errorf("%s (htmx %v): %d, message %q; want 422 with a message", name, htmx, r.status, r.text("form-error"))
				continue
			}
			for field, v := range form {
				if field != "confirm" && field != "algorithm" && field != "budget_period" {
					if got := r.doc.Find(`#`+field).AttrOr("value", ""); got != v[0] {
						t.Errorf("%s: field %s refilled with %q, want %q", name, field, got, v[0])
					}
				}
			}
		}
	}
	if e.auditCount() != before {
		t.Errorf("refused forms wrote %d audit rows", e.auditCount()-before)
	}

	// Extra fields are refused; a member has no form and gets 403, even for
	// their own limits.
	if r := owner.post(path, limitsForm("confirm", "yes", "member_id", "1")); r.status != http.StatusBadRequest {
		t.Errorf("extra field: %d, want 400", r.status)
	}
	if home := ada.get("/console/"); home.has("limits-form") || !home.has("limits-summary") {
		t.Errorf("member's page: limits form %v, read-only summary %v", home.has("limits-form"), home.has("limits-summary"))
	}
	for _, p := range []string{path, "/console/team/limits"} {
		if r := ada.post(p, limitsForm("confirm", "yes", "rate", "1000000")); r.status != http.StatusForbidden {
			t.Errorf("member raises limits at %s: %d, want 403", p, r.status)
		}
	}
	if r := owner.post("/console/members/999999/limits", limitsForm("confirm", "yes")); r.status != http.StatusNotFound {
		t.Errorf("another team's member: %d, want 404", r.status)
	}
}

func TestOwnerSetsTeamLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	page := owner.get("/console/team/limits")
	if page.status != http.StatusOK || !page.has("limits-form") || !page.has("team-spend") {
		t.Fatalf("team limits page: %d", page.status)
	}
	// It has its own tab, and with no rate set its period is blank too.
	if current := page.doc.Find(`nav [aria-current="page"]`); current.Text() != "Team limits" || current.AttrOr("href", "") != "/console/team/limits" {
		t.Errorf("the team limits page highlights tab %q", current.Text())
	}
	if got := page.doc.Find("#period").AttrOr("value", "(none)"); got != "" || page.doc.Find("#rate").AttrOr("value", "") != "" {
		t.Errorf("with no rate the period is filled with %q", got)
	}
	r := owner.post("/console/team/limits", limitsForm("budget", "100", "budget_period", "monthly", "tpm", "1000000"))
	if !r.has("confirm") {
		t.Fatalf("team limits without confirmation: %d", r.status)
	}
	wantRedirect(t, "confirmed team limits",
		owner.post("/console/team/limits", limitsForm("confirm", "yes", "budget", "100", "tpm", "1000000")), "/console/team/limits")
	l, err := e.st.TeamLimits(t.Context(), o.TeamID)
	if err != nil {
		t.Fatal(err)
	}
	if l.Budget == nil || *l.Budget != 100_000_000 || l.TokensPerMinute != 1_000_000 {
		t.Errorf("team limits = %+v", l)
	}
	entries, _ := e.st.Audit(t.Context(), &o.TeamID, 1)
	if len(entries) != 1 || entries[0].Action != "team.limits" {
		t.Errorf("last audit entry: %+v", entries)
	}
	page = owner.get("/console/team/limits")
	if got := strings.Join(strings.Fields(page.text("team-spend")), " "); got != "$0.00 of $100.00" {
		t.Errorf("team spend shows %q", got)
	}
	if r := owner.post("/console/team/limits", limitsForm("confirm", "yes", "concurrency", "-1")); r.status != http.StatusUnprocessableEntity {
		t.Errorf("bad team limits: %d, want 422", r.status)
	}
}
