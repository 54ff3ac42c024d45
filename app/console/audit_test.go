package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

// rawUnits are what an audit sentence must not show: JSON, and nanosecond
// durations or micro-dollar amounts (long digit runs).
var rawUnits = regexp.MustCompile(`[{}]|\d{7,}`)

// machineWords reports whether s shows JSON, raw units or an action code.
func machineWords(s string) bool {
	for _, a := range store.AuditActions() {
		if strings.Contains(s, a) {
			return true
		}
	}
	return rawUnits.MatchString(s)
}

// TestAuditSentencesCoverEveryAction writes at least one entry of every action
// in store.AuditActions, through the same store functions the console and CLI
// call, and checks each reads as a sentence with its units formatted. A new
// action fails here until it has a sentence and is written below.
func TestAuditSentencesCoverEveryAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")
	by := store.MemberActor(o.ID)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.st.SetMemberStatus(ctx, by, o.TeamID, ada.ID, store.StatusDisabled))
	must(e.st.SetMemberStatus(ctx, by, o.TeamID, ada.ID, store.StatusActive))
	must(e.st.SetMemberRole(ctx, by, o.TeamID, ada.ID, store.RoleOwner))
	must(e.st.SetMemberRole(ctx, by, o.TeamID, ada.ID, store.RoleMember))
	budget := int64(5_000_000)
	must(e.st.SetMemberLimits(ctx, by, o.TeamID, ada.ID, store.Limits{RateLimit: 60, RatePeriod: time.Minute,
		Budget: &budget, BudgetPeriod: "monthly"}))
	must(e.st.SetTeamLimits(ctx, by, o.TeamID, store.Limits{Concurrency: 8, RatePeriod: time.Second}))
	must(nil, e.st.SetDefaultTier(ctx, by, o.TeamID, store.TierNone))
	route, err := e.st.AddRoute(ctx, by, store.RouteSpec{TeamID: o.TeamID, Preset: "anthropic", UpstreamURL: "http://127.0.0.1:1"})
	must(route, err)
	must(e.st.UpdateRoute(ctx, by, route.ID, store.RouteSpec{TeamID: o.TeamID, Preset: "anthropic", UpstreamURL: "http://127.0.0.1:2"}))
	target := store.RouteTarget{UpstreamURL: "http://127.0.0.1:3"}
	must(nil, e.st.AddRouteTarget(ctx, by, o.TeamID, route.Prefix, target))
	must(nil, e.st.RemoveRouteTarget(ctx, by, o.TeamID, route.Prefix, target))
	doomed, err := e.st.AddRoute(ctx, by, store.RouteSpec{TeamID: o.TeamID, Preset: "openai", UpstreamURL: "http://127.0.0.1:4"})
	must(doomed, err)
	must(e.st.DeleteRoute(ctx, by, o.TeamID, doomed.ID))
	_, _, err = e.st.CreateInvite(ctx, by, o.TeamID, "bo@acme.test", "member")
	must(nil, err)
	_, _, err = e.st.ReissueInvite(ctx, by, o.TeamID, "bo@acme.test")
	must(nil, err)
	must(nil, e.st.RevokeInvites(ctx, by, o.TeamID, "bo@acme.test"))
	sso, err := e.st.SetSSOMethod(ctx, by, store.SSOMethod{TeamID: o.TeamID, Kind: store.SignInOIDC,
		IssuerURL: "https://id.example", ClientID: "tollgate", JoinPolicy: store.JoinInvited, Enabled: true})
	must(sso, err)
	must(e.st.SetPasswordSignIn(ctx, by, o.TeamID, true))
	tok, err := e.st.CreateAdminToken(ctx, by, store.AdminTokenSpec{TeamID: &o.TeamID, Name: "ci", Role: "read", Lifetime: time.Hour})
	must(tok, err)
	must(e.st.RevokeAdminToken(ctx, by, &o.TeamID, tok.ID))
	must(e.st.SetRouteResilience(ctx, by, o.TeamID, route.Prefix, 3, "/v1/models"))
	key, err := e.st.IssueKey(ctx, store.MemberActor(ada.ID), o.TeamID, ada.ID, "laptop")
	must(key, err)
	rotated, err := e.st.RotateKey(ctx, by, o.TeamID, key.ID, time.Hour)
	must(rotated, err)
	must(e.st.RevokeKey(ctx, by, o.TeamID, rotated.ID))
	price, err := e.st.Price(ctx, "claude-sonnet-4-5")
	must(price, err)
	price.OutputPerMTok = 16_000_000
	must(e.st.SetPrice(ctx, store.ActorCLI, price))
	must(e.st.CreateTier(ctx, by, o.TeamID, store.Tier{Name: "core", Weight: 2, AutoApprove: 1_000_000,
		Limits: store.Limits{Budget: &budget, RatePeriod: time.Second}}))
	must(e.st.ChangeTier(ctx, by, o.TeamID, "core", func(tr store.Tier) store.Tier { tr.Weight = 4; return tr }))
	must(e.st.SetTeamOverBudget(ctx, by, o.TeamID, store.OverBudgetFit))
	must(e.st.AssignTier(ctx, by, o.TeamID, ada.ID, "core"))
	auto, err := e.st.RequestBudget(ctx, store.MemberActor(ada.ID), o.TeamID, ada.ID, 1_000_000, "eval run")
	must(auto, err)
	asked, err := e.st.RequestBudget(ctx, store.MemberActor(ada.ID), o.TeamID, ada.ID, 20_000_000, "eval run for the paper")
	must(asked, err)
	must(e.st.ApproveBudgetRequest(ctx, by, o.TeamID, asked.ID, "go ahead"))
	asked, err = e.st.RequestBudget(ctx, store.MemberActor(ada.ID), o.TeamID, ada.ID, 3_000_000, "more")
	must(asked, err)
	must(e.st.DeclineBudgetRequest(ctx, by, o.TeamID, asked.ID, "not this month"))
	must(e.st.AssignTier(ctx, by, o.TeamID, ada.ID, ""))
	must(nil, e.st.DeleteTier(ctx, by, o.TeamID, "core"))
	leaver, err := e.st.AddMember(ctx, by, o.TeamID, "leaver@acme.test", store.RoleMember)
	must(leaver, err)
	must(e.st.RemoveMember(ctx, by, o.TeamID, leaver.ID))
	hook, err := e.st.CreateWebhook(ctx, by, o.TeamID, "ops", "http://127.0.0.1:6/hook", store.WebhookSlack)
	must(hook, err)
	must(nil, e.st.DeleteWebhook(ctx, by, o.TeamID, hook.ID))

	entries, err := e.st.Audit(ctx, nil, 1000)
	must(entries, err)
	emails := map[int64]string{o.ID: o.Email, ada.ID: ada.Email}
	seen := map[string][]string{}
	for _, entry := range entries {
		s := console.AuditSentence(entry, emails)
		seen[entry.Action] = append(seen[entry.Action], s)
		if strings.Contains(s, "could not be read") || machineWords(s) ||
			!strings.HasSuffix(s, ".") {
			t.Errorf("%s reads %q, want a sentence without codes, JSON or raw units", entry.Action, s)
		}
	}
	for _, action := range store.AuditActions() {
		if len(seen[action]) == 0 {
			t.Errorf("no %s entry was written: add a write of it above, so its sentence is checked", action)
		}
	}
	for action, want := range map[string]string{
		store.ActionMemberStatus:      "owner@acme.test cut off ada@acme.test.",
		store.ActionMemberRole:        "owner@acme.test made ada@acme.test an owner.",
		store.ActionMemberRemove:      "owner@acme.test removed leaver@acme.test from the team.",
		store.ActionBudgetApprove:     "owner@acme.test approved ada@acme.test's request for $20.00 more budget: their budget this period is now $26.00, noting \"go ahead\".",
		store.ActionBudgetAutoApprove: "The auto-approve ceiling of the tier core approved at once ada@acme.test's request for $1.00 more budget: their budget this period is now $6.00.",
		store.ActionMemberTier:        "owner@acme.test took ada@acme.test out of the tier core.",
		store.ActionTeamDefaultTier:   "owner@acme.test set new members to land in no tier (no limit).",
		store.ActionMemberLimits:      "owner@acme.test set ada@acme.test's requests to 60 per minute (token bucket) (was no limit) and budget to $5.00 per month (was none).",
		store.ActionTeamLimits:        "owner@acme.test set the team's requests in flight to 8 (was no limit).",
		store.ActionKeyRevoke:         "owner@acme.test revoked ada@acme.test's key " + rotated.ID + ".",
		store.ActionPriceSet:          "The operator (CLI) set claude-sonnet-4-5's output price to $16.00 per million tokens (was $15.00 per million tokens).",
		store.ActionRouteUpdate:       "owner@acme.test set the route /anthropic's upstream to http://127.0.0.1:2 (was http://127.0.0.1:1).",
	} {
		if !containsString(seen[action], want) {
			t.Errorf("%s reads %q, want %q among them", action, seen[action], want)
		}
	}
	if !containsString(seen[store.ActionMemberStatus], "owner@acme.test restored ada@acme.test.") {
		t.Errorf("restoring reads %q", seen[store.ActionMemberStatus])
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestAuditPageFiltersAndPages: the page shows sentences, filters by member
// and action with a plain GET form, and pages by entry id without overlap.
func TestAuditPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")
	by := store.MemberActor(o.ID)
	for i := range 30 {
		status := store.StatusDisabled
		if i%2 == 1 {
			status = store.StatusActive
		}
		if _, err := e.st.SetMemberStatus(ctx, by, o.TeamID, ada.ID, status); err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.ChangeTeamLimits(ctx, by, o.TeamID, func(l store.Limits) store.Limits { l.Concurrency++; return l }); err != nil {
			t.Fatal(err)
		}
	}

	first := owner.get("/console/audit")
	wantStatus(t, "audit", first, http.StatusOK)
	rows := first.doc.Find(`[data-testid="audit-sentence"]`)
	if rows.Length() != 50 || !first.has("audit-older") || first.has("audit-newest") {
		t.Fatalf("first page: %d rows, older link %v, newest link %v", rows.Length(), first.has("audit-older"), first.has("audit-newest"))
	}
	if strings.Contains(first.body, "member.status") && !strings.Contains(first.body, `value="member.status"`) {
		t.Error("the audit page shows the action code member.status outside the filter's values")
	}
	if got := rows.First().Text(); got != "owner@acme.test set the team's requests in flight to 30 (was 29)." {
		t.Errorf("newest entry reads %q", got)
	}
	older, _ := first.doc.Find(`[data-testid="audit-older"]`).Attr("href")
	second := owner.get(older)
	wantStatus(t, "older page", second, http.StatusOK)
	firstTexts := map[string]bool{}
	first.doc.Find(`[data-testid="audit-row"]`).Each(func(_ int, s *goquery.Selection) { firstTexts[s.AttrOr("data-id", "")] = true })
	n := 0
	second.doc.Find(`[data-testid="audit-row"]`).Each(func(_ int, s *goquery.Selection) {
		n++
		if firstTexts[s.AttrOr("data-id", "")] {
			t.Errorf("entry on both pages: %q", s.Text())
		}
	})
	// 60 changes here, plus setup (team, owner, password), the fixture's
	// choice of no defaults (default tier, team budget, the owner's tier, the
	// tier itself) and the invite (invite, member, password): 70 in all.
	if n != 20 || second.has("audit-older") || !second.has("audit-newest") {
		t.Errorf("second page: %d rows, older %v, newest %v; want 20, no older, a link to the newest", n, second.has("audit-older"), second.has("audit-newest"))
	}

	cutOffs := owner.get("/console/audit?action=member.status&member=" + strconv.FormatInt(ada.ID, 10))
	wantStatus(t, "filtered audit", cutOffs, http.StatusOK)
	sentences := cutOffs.doc.Find(`[data-testid="audit-sentence"]`)
	if sentences.Length() != 30 || cutOffs.has("audit-older") {
		t.Errorf("ada's cut-offs: %d rows, want 30 on one page", sentences.Length())
	}
	sentences.Each(func(_ int, s *goquery.Selection) {
		if !strings.HasPrefix(s.Text(), "owner@acme.test cut off ada@acme.test") && !strings.HasPrefix(s.Text(), "owner@acme.test restored ada@acme.test") {
			t.Errorf("filtered entry %q is not a cut-off or restore of ada", s.Text())
		}
	})
	if v, _ := cutOffs.doc.Find(`#audit-action option[selected]`).Attr("value"); v != "member.status" {
		t.Errorf("the filter form forgets the action: %q", v)
	}
	// Ada's own entries: the invite, joining, her password, and the 30 changes.
	adas := owner.get("/console/audit?member=" + strconv.FormatInt(ada.ID, 10))
	if got := adas.doc.Find(`[data-testid="audit-sentence"]`).Length(); got != 33 {
		t.Errorf("ada's entries: %d, want 33", got)
	}

	for _, bad := range []string{"?action=nope", "?before=x", "?member=999999"} {
		if r := owner.get("/console/audit" + bad); r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
			t.Errorf("audit%s: %d, want 400 or 404", bad, r.status)
		}
	}
	if r := owner.get("/console/audit?" + url.Values{"action": {"<b>"}}.Encode()); strings.Contains(r.body, "<b>") {
		t.Error("the unknown action is echoed unescaped")
	}
}
