package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/store"
)

func TestCutOffAndRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")
	keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))
	status := "/console/members/" + strconv.FormatInt(m.ID, 10) + "/status"

	members := owner.get("/console/members")
	row := members.doc.Find(`[data-testid="member-row"][data-email="ada@acme.test"]`)
	cells := row.Find(`[data-testid="usage"]`)
	// This console has no live counters: "—" for them, not an invented 0; the
	// spend comes from the ledger.
	if row.Find(`[data-testid="member-status"]`).Text() != "Active" || cells.Length() != 3 ||
		texts(cells) != "— — $0.00" {
		t.Errorf("member row: status %q, usage cells %q; want active, two dashes and $0.00",
			row.Find(`[data-testid="member-status"]`).Text(), cells.Text())
	}
	if got := strings.TrimSpace(row.Find("td.num").First().Text()); got != "1" {
		t.Errorf("keys count = %q, want 1", got)
	}

	// Without JavaScript, cutting off asks first.
	before := e.auditCount()
	if r := owner.post(status, url.Values{"status": {"disabled"}}); !r.has("confirm") || e.auditCount() != before {
		t.Fatalf("unconfirmed cut-off: %d, confirm page %v, audit rows %d", r.status, r.has("confirm"), e.auditCount()-before)
	}
	r := owner.htmx(status, url.Values{"status": {"disabled"}, "confirm": {"yes"}})
	// The partial is exactly the row it swaps (a bare <tr>, which an HTML
	// parser would drop outside a table, so it is checked as text).
	if r.status != http.StatusOK || !strings.HasPrefix(r.body, `<tr id="member-`+strconv.FormatInt(m.ID, 10)+`"`) ||
		!strings.HasSuffix(r.body, "</tr>") || strings.Count(r.body, "<tr") != 1 || !strings.Contains(r.body, "restore-button") ||
		!strings.Contains(r.body, "$0.00") {
		t.Fatalf("HTMX cut-off: %d, want the member's row only, now with Restore and its figures\n%s", r.status, r.body)
	}

	// The cut-off ended ada's session: she signs in again, to see she is cut off.
	if r := ada.get("/console/"); r.status != http.StatusSeeOther {
		t.Errorf("ada's session after her cut-off: %d, want a redirect to sign in", r.status)
	}
	ada = e.signIn("ada@acme.test")
	home := ada.get("/console/")
	if !strings.Contains(home.text("cut-off"), "You are cut off") || home.has("create-key") {
		t.Errorf("cut-off member's page: banner %q, create form shown %v", home.text("cut-off"), home.has("create-key"))
	}
	if r := ada.htmx("/console/keys", url.Values{"name": {"more"}}); r.status != http.StatusUnprocessableEntity || r.has("new-key") {
		t.Errorf("cut-off member creates a key: %d, want 422 and no key", r.status)
	}
	if r := owner.post("/console/members/"+strconv.FormatInt(o.ID, 10)+"/status", url.Values{"status": {"disabled"}, "confirm": {"yes"}}); r.status != http.StatusBadRequest {
		t.Errorf("owner cuts themselves off: %d, want 400", r.status)
	}

	wantRedirect(t, "restore", owner.post(status, url.Values{"status": {"active"}}), "/console/members")
	if r := ada.get("/console/"); r.status != http.StatusSeeOther {
		t.Errorf("ada's session from while she was cut off, after her restore: %d, want a redirect to sign in", r.status)
	}
	if home := e.signIn("ada@acme.test").get("/console/"); home.has("cut-off") || !home.has("create-key") {
		t.Error("restored member still shown as cut off")
	}
	if r := owner.get("/console/members/999999"); r.status != http.StatusNotFound {
		t.Errorf("a member of no team: %d, want 404", r.status)
	}
}

func TestRoutesShowWhetherTheCredentialIsSetNeverItsValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")

	r := owner.post("/console/routes", url.Values{"preset": {"anthropic"}, "upstream": {"http://127.0.0.1:9"}})
	wantRedirect(t, "add the anthropic preset", r, "/console/routes")
	r = owner.post("/console/routes", url.Values{"preset": {"openai"}, "upstream": {"http://127.0.0.1:9"}})
	wantRedirect(t, "add the openai preset", r, "/console/routes")

	// Refused: metadata address, duplicate prefix, generic route without fields.
	for name, form := range map[string]url.Values{
		"metadata upstream":  {"preset": {"anthropic"}, "prefix": {"/meta"}, "upstream": {"http://169.254.169.254"}},
		"duplicate prefix":   {"preset": {"anthropic"}, "upstream": {"http://127.0.0.1:9"}},
		"generic, no fields": {"preset": {""}},
	} {
		r := owner.post("/console/routes", form)
		if r.status != http.StatusUnprocessableEntity || !r.has("form-error") || !r.has("route-form") {
			t.Errorf("%s: %d, want 422 with the form and its error", name, r.status)
		}
	}

	// A second account on the anthropic route shows as a target, with whether its variable is set.
	team, err := e.st.FindTeam(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddRouteTarget(context.Background(), store.ActorCLI, team.ID, "/anthropic",
		store.RouteTarget{UpstreamURL: "http://127.0.0.1:11", CredentialEnv: "TOLLGATE_CREDENTIAL_SECOND"}); err != nil {
		t.Fatal(err)
	}
	page := owner.get("/console/routes")
	target := strings.Join(strings.Fields(page.doc.Find(`[data-prefix="/anthropic"] [data-testid="route-target"]`).Text()), " ")
	if target != "+ http://127.0.0.1:11 with $TOLLGATE_CREDENTIAL_SECOND not set" {
		t.Errorf("anthropic route's target shows %q", target)
	}
	if got := strings.Join(strings.Fields(page.doc.Find(`[data-prefix="/anthropic"] [data-testid="route-resilience"]`).Text()), " "); got != "2 attempts for GET/HEAD/OPTIONS; health probes off" {
		t.Errorf("anthropic route's resilience shows %q", got)
	}
	states := map[string]string{}
	page.doc.Find(`[data-testid="route-row"]`).Each(func(_ int, s *goquery.Selection) {
		states[s.AttrOr("data-prefix", "")] = strings.TrimSpace(s.Find(`[data-testid="credential-state"]`).Text())
	})
	if states["/anthropic"] != "set" || states["/openai"] != "not set" || len(states) != 2 {
		t.Errorf("credential states = %v, want /anthropic set (planted) and /openai not set", states)
	}

	// Edit the route; then no page, partial or log holds the credential.
	edit := page.doc.Find(`[data-prefix="/openai"] a`).AttrOr("href", "")
	form := owner.get(edit)
	if form.doc.Find("#upstream").AttrOr("value", "") != "http://127.0.0.1:9" {
		t.Fatalf("edit form upstream = %q", form.doc.Find("#upstream").AttrOr("value", ""))
	}
	wantRedirect(t, "update", owner.post(edit, url.Values{"prefix": {"/oai"}, "upstream": {"http://127.0.0.1:10"}, "dialect": {"openai"},
		"header": {"Authorization"}, "credential_env": {"OPENAI_API_KEY"}, "format": {"Bearer {}"}, "fail_mode": {"open"}}), "/console/routes")
	if r := owner.post(edit, url.Values{"prefix": {"Not A Prefix"}}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("bad edit: %d, want 422", r.status)
	}
	member, _ := e.invite(owner, "ada@acme.test")
	var bodies []string
	for _, c := range []*client{owner, member} {
		for _, path := range []string{"/console/", "/console/routes", edit, "/console/members", "/console/audit"} {
			bodies = append(bodies, c.get(path).body)
		}
	}
	home := member.get("/console/")
	if !strings.Contains(home.text("snippets"), e.srv.URL+"/oai/v1") || !strings.Contains(home.text("snippets"), e.srv.URL+"/anthropic") {
		t.Errorf("snippets do not call this gateway's routes:\n%s", home.text("snippets"))
	}
	for _, b := range append(bodies, e.logs.String()) {
		if strings.Contains(b, providerSecret) {
			t.Fatal("the provider credential was rendered or logged")
		}
	}
	if r := owner.get("/console/routes/424242"); r.status != http.StatusNotFound {
		t.Errorf("another team's route id: %d, want 404", r.status)
	}
}

func TestAuditPageNamesWhoDidWhat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, _ := e.invite(owner, "ada@acme.test")
	keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))
	e.owner("beta", "owner@beta.test")

	page := owner.get("/console/audit")
	joined := texts(page.doc.Find(`[data-testid="audit-sentence"]`))
	for _, want := range []string{"ada@acme.test issued the key ", ` ("laptop") to ada@acme.test.`,
		"owner@acme.test invited ada@acme.test as a member", "The setup link created the team acme."} {
		if !strings.Contains(joined, want) {
			t.Errorf("audit page lacks %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "beta") {
		t.Error("the audit page shows another team's changes")
	}
}
