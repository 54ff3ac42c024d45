package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestChecklistShowsAndEditsDefaults: a new team's checklist starts with the
// limits new members get (the default tier's and the team budget), which the
// owner changes there; a refused value is said in the form and changes
// nothing; a member invited in the tier "none" shows "no limit" in red on the
// dashboard, as does the team once its budget is cleared.
func TestChecklistShowsAndEditsDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	owner, o := e.ownerWithDefaults("acme", "owner@acme.test")

	r := owner.get("/console/dashboard")
	wantStatus(t, "dashboard", r, http.StatusOK)
	form := r.doc.Find(`[data-testid="defaults-form"]`)
	for name, want := range map[string]string{"rate": "60", "period": "1m", "tpm": "100000", "concurrency": "4",
		"budget": "20.00", "team_budget": "100.00"} {
		if got := form.Find(`input[name="`+name+`"]`).AttrOr("value", ""); got != want {
			t.Errorf("checklist shows %s = %q, want %q", name, got, want)
		}
	}
	if got := steps(r)["Check the limits new members get"]; !got {
		t.Errorf("the limits step is not done on a new team: %v", steps(r))
	}
	if r.has("no-limit") {
		t.Error("a new team's dashboard marks someone as having no limit")
	}

	before := e.auditCount()
	bad := owner.htmx("/console/checklist/defaults", url.Values{"rate": {"ten"}, "budget": {"5"}, "team_budget": {"50"}})
	wantStatus(t, "refused defaults", bad, http.StatusUnprocessableEntity)
	if msg := bad.text("form-error"); !strings.Contains(msg, "Requests must be a whole number") {
		t.Errorf("refused defaults say %q", msg)
	}
	if e.auditCount() != before {
		t.Error("a refused defaults form changed something")
	}
	bad = owner.post("/console/checklist/defaults", url.Values{"rate": {"30"}, "team_budget": {"lots"}})
	wantStatus(t, "refused team budget", bad, http.StatusUnprocessableEntity)
	if msg := bad.text("form-error"); !strings.Contains(msg, "Team budget") {
		t.Errorf("refused team budget says %q", msg)
	}

	ok := owner.post("/console/checklist/defaults", url.Values{"rate": {"30"}, "period": {"1m"}, "tpm": {""},
		"concurrency": {"2"}, "budget": {"5"}, "team_budget": {"50"}})
	wantRedirect(t, "save defaults", ok, "/console/dashboard#defaults")
	tier, err := e.st.DefaultTier(ctx, o.TeamID)
	if err != nil || tier.Limits.RateLimit != 30 || tier.Limits.RatePeriod != time.Minute || tier.Limits.TokensPerMinute != 0 ||
		tier.Limits.Concurrency != 2 || tier.Limits.Budget == nil || *tier.Limits.Budget != 5_000_000 {
		t.Fatalf("default tier after saving = %+v, %v", tier.Limits, err)
	}
	if team, _ := e.st.TeamLimits(ctx, o.TeamID); team.Budget == nil || *team.Budget != 50_000_000 {
		t.Errorf("team budget after saving = %+v", team.Budget)
	}
	if got := owner.htmx("/console/checklist/defaults", url.Values{"rate": {"30"}, "budget": {"5"}, "team_budget": {"50"}}); !got.has("defaults-saved") {
		t.Errorf("an HTMX save does not say saved: %.300s", got.body)
	}

	// The invite form offers the default tier first and "none" explicitly.
	r = owner.get("/console/members")
	if sel := r.doc.Find(`#invite-tier option[selected]`).Text(); sel != "default (the default)" {
		t.Errorf("invite form preselects %q, want the default tier", sel)
	}
	inv := owner.htmx("/console/members/invite", url.Values{"email": {"free@acme.test"}, "role": {"member"}, "tier": {"none"}})
	wantStatus(t, "invite in no tier", inv, http.StatusOK)
	link := strings.TrimPrefix(inv.text("invite-link"), e.srv.URL)
	wantRedirect(t, "accept", e.client().post(link, url.Values{"password": {password}}), "/console/")
	ada, _ := e.invite(owner, "ada@acme.test")
	_ = ada
	r = owner.get("/console/dashboard")
	marked := map[string]bool{}
	for _, row := range r.doc.Find(`[data-testid="live-spend"]`).EachIter() {
		email := strings.TrimSpace(row.Closest("tr").Find("a").First().Text())
		marked[email] = row.Find(`.no-limit[data-testid="no-limit"]`).Length() == 1
	}
	if !marked["free@acme.test"] || marked["ada@acme.test"] || marked["owner@acme.test"] {
		t.Errorf("no-limit marks on the dashboard: %v; want only the member invited in no tier", marked)
	}
	if _, err := e.st.SetTeamLimits(ctx, store.ActorCLI, o.TeamID, store.NoLimits()); err != nil {
		t.Fatal(err)
	}
	if r = owner.get("/console/dashboard"); r.doc.Find(`[data-testid="team-spend"] .no-limit`).Length() != 1 {
		t.Error("a team without a budget is not marked no limit")
	}
}
