package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/app/store"
)

// auditActions is the actions of the team's audit rows, oldest first.
func (e *env) auditActions(teamID int64) []string {
	e.t.Helper()
	entries, err := e.st.Audit(e.t.Context(), &teamID, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var actions []string
	for _, a := range slices.Backward(entries) {
		actions = append(actions, a.Action)
	}
	return actions
}

func (e *env) route(teamID int64, prefix string) (store.Route, bool) {
	e.t.Helper()
	routes, err := e.st.Routes(e.t.Context(), teamID)
	if err != nil {
		e.t.Fatal(err)
	}
	i := slices.IndexFunc(routes, func(r store.Route) bool { return r.Prefix == prefix })
	if i < 0 {
		return store.Route{}, false
	}
	return routes[i], true
}

// TestOwnerManagesRouteTargetsRetriesAndDeletion: the console does for a route
// what `tollgate admin` add-target, remove-target and set-route do, and deletes
// it, each audited; a member cannot, and another team's owner finds nothing.
func TestOwnerManagesRouteTargetsRetriesAndDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	member, _ := e.invite(owner, "ada@acme.test")
	otherOwner, _ := e.owner("beta", "owner@beta.test")
	wantRedirect(t, "add a route", owner.post("/console/routes", url.Values{"preset": {"anthropic"}, "upstream": {"http://127.0.0.1:9"}}), "/console/routes")
	rt, _ := e.route(o.TeamID, "/anthropic")
	page := "/console/routes/" + strconv.FormatInt(rt.ID, 10)

	// Neither a member nor another team's owner can change it.
	before := e.auditCount()
	for _, c := range []struct {
		who    string
		client *client
		status int
	}{{"a member", member, http.StatusForbidden}, {"another team's owner", otherOwner, http.StatusNotFound}} {
		for path, form := range map[string]url.Values{
			page + "/targets":        {"upstream": {"http://127.0.0.1:11"}},
			page + "/targets/remove": {"upstream": {"http://127.0.0.1:9"}},
			page + "/resilience":     {"attempts": {"3"}, "health_path": {"/v1/models"}},
			page + "/delete":         {"confirm": {"yes"}},
		} {
			if r := c.client.post(path, form); r.status != c.status {
				t.Errorf("%s POST %s: %d, want %d", c.who, path, r.status, c.status)
			}
		}
	}
	if got, _ := e.route(o.TeamID, "/anthropic"); e.auditCount() != before || len(got.Targets) != 0 || got.MaxAttempts != rt.MaxAttempts {
		t.Fatalf("refused route changes changed something: %d audit rows, %+v", e.auditCount()-before, got)
	}

	// Targets: add two, refuse bad ones with a message, remove one.
	wantRedirect(t, "add a target", owner.post(page+"/targets", url.Values{"upstream": {"http://127.0.0.1:11"}}), page+"#targets")
	wantRedirect(t, "add a target with its own credential", owner.post(page+"/targets",
		url.Values{"upstream": {"http://127.0.0.1:12"}, "credential_env": {"TOLLGATE_CREDENTIAL_EU"}}), page+"#targets")
	for name, form := range map[string]url.Values{
		"metadata address":    {"upstream": {"http://169.254.169.254"}},
		"not a URL":           {"upstream": {"nope"}},
		"a variable not ours": {"upstream": {"http://127.0.0.1:13"}, "credential_env": {"HOME"}},
		"the same twice":      {"upstream": {"http://127.0.0.1:11"}},
	} {
		r := owner.post(page+"/targets", form)
		if r.status != http.StatusUnprocessableEntity || r.doc.Find(`[data-testid="targets"] [data-testid="form-error"]`).Length() != 1 {
			t.Errorf("%s: %d, want 422 with the targets form's message", name, r.status)
		}
		if got := r.doc.Find("#target-upstream").AttrOr("value", ""); got != form.Get("upstream") {
			t.Errorf("%s: the form lost the posted upstream (%q)", name, got)
		}
	}
	edit := owner.get(page)
	if targets := edit.doc.Find(`[data-testid="target"]`); targets.Length() != 2 ||
		!strings.Contains(targets.Last().Text(), "$TOLLGATE_CREDENTIAL_EU") || !strings.Contains(targets.First().Text(), "$ANTHROPIC_API_KEY") {
		t.Errorf("the edit page lists the targets as %q", edit.text("targets"))
	}
	// Removed as the page's own form posts it: with the variable it shows.
	wantRedirect(t, "remove a target", owner.post(page+"/targets/remove",
		url.Values{"upstream": {"http://127.0.0.1:11"}, "credential_env": {"ANTHROPIC_API_KEY"}}), page+"#targets")
	if r := owner.post(page+"/targets/remove", url.Values{"upstream": {"http://127.0.0.1:11"}}); r.status != http.StatusNotFound {
		t.Errorf("remove a target that is gone: %d, want 404", r.status)
	}
	if got, _ := e.route(o.TeamID, "/anthropic"); len(got.Targets) != 1 || got.Targets[0].UpstreamURL != "http://127.0.0.1:12" {
		t.Errorf("targets after add, add, remove: %+v", got.Targets)
	}

	// Attempts and health probes.
	wantRedirect(t, "set resilience", owner.post(page+"/resilience", url.Values{"attempts": {"3"}, "health_path": {"/v1/models"}}), page+"?saved#resilience")
	if got, _ := e.route(o.TeamID, "/anthropic"); got.MaxAttempts != 3 || got.HealthPath != "/v1/models" {
		t.Errorf("resilience after saving: %d attempts, health %q", got.MaxAttempts, got.HealthPath)
	}
	if r := owner.get(page + "?saved"); !r.has("resilience-saved") || r.doc.Find("#attempts").AttrOr("value", "") != "3" {
		t.Error("the page after saving does not say so or show the attempts")
	}
	for _, attempts := range []string{"0", "6", "two", ""} {
		r := owner.post(page+"/resilience", url.Values{"attempts": {attempts}, "health_path": {"/v1/models"}})
		if r.status != http.StatusUnprocessableEntity || r.doc.Find(`[data-testid="resilience"] [data-testid="form-error"]`).Length() != 1 {
			t.Errorf("attempts %q: %d, want 422 with a message", attempts, r.status)
		}
	}
	if r := owner.post(page+"/resilience", url.Values{"attempts": {"2"}, "health_path": {"no slash"}}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("a health path without a slash: %d, want 422", r.status)
	}

	// Delete: asks first without JavaScript, then the route is gone.
	if r := owner.post(page+"/delete", url.Values{}); r.status != http.StatusOK || !r.has("confirm") {
		t.Fatalf("delete without confirm: %d, want the confirmation page", r.status)
	}
	if _, ok := e.route(o.TeamID, "/anthropic"); !ok {
		t.Fatal("an unconfirmed delete removed the route")
	}
	wantRedirect(t, "delete", owner.post(page+"/delete", url.Values{"confirm": {"yes"}}), "/console/routes")
	if _, ok := e.route(o.TeamID, "/anthropic"); ok {
		t.Error("the route is still there after delete")
	}
	if r := owner.get(page); r.status != http.StatusNotFound {
		t.Errorf("the deleted route's page: %d, want 404", r.status)
	}
	want := []string{"route.add", "route.target.add", "route.target.add", "route.target.remove", "route.resilience", "route.delete"}
	var got []string
	for _, a := range e.auditActions(o.TeamID) {
		if strings.HasPrefix(a, "route.") {
			got = append(got, a)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("audited route actions %v, want %v", got, want)
	}
}

// On a gateway several teams share, each team's owners are offered only the
// credentials the deployment grants their team; naming another team's is
// refused with the form re-rendered; a stored route that breaks the grants is
// shown disabled, with the reason.
func TestRoutesOfferOnlyTheTeamsGrantedCredentials(t *testing.T) {
	t.Parallel()
	grants, err := grant.Parse("TOLLGATE_CREDENTIAL_ACME: hosts=127.0.0.1 teams=acme; TOLLGATE_CREDENTIAL_BETA: hosts=127.0.0.1 teams=beta;" +
		"ANTHROPIC_API_KEY: hosts=api.anthropic.com teams=acme")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *console.Options) { o.Store = o.Store.WithGrants(grants) })
	acme, a := e.owner("acme", "owner@acme.test")
	beta, _ := e.owner("beta", "owner@beta.test")
	offered := func(c *client) string {
		var envs []string
		c.get("/console/routes").doc.Find(`select#credential_env option`).Each(func(_ int, s *goquery.Selection) {
			envs = append(envs, s.AttrOr("value", ""))
		})
		return strings.Join(envs, ",")
	}
	if got := offered(acme); got != ",ANTHROPIC_API_KEY,OPENAI_API_KEY,TOLLGATE_CREDENTIAL_ACME" {
		t.Errorf("acme is offered %q", got)
	}
	if got := offered(beta); got != ",OPENAI_API_KEY,TOLLGATE_CREDENTIAL_BETA" {
		t.Errorf("beta is offered %q", got)
	}

	before := e.auditCount()
	r := acme.post("/console/routes", url.Values{"prefix": {"/steal"}, "upstream": {"http://127.0.0.1:9"}, "dialect": {"anthropic"},
		"header": {"x-api-key"}, "credential_env": {"TOLLGATE_CREDENTIAL_BETA"}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.text("form-error"), "not granted to team acme") {
		t.Errorf("another team's credential: %d %q", r.status, r.text("form-error"))
	}
	if e.auditCount() != before {
		t.Error("a refused route was written")
	}

	if _, err := e.pool.Exec(t.Context(), `INSERT INTO route (team_id, prefix, upstream_url, dialect, credential_header, credential_env)
		VALUES ($1, '/raw', 'http://127.0.0.1:9', 'anthropic', 'x-api-key', 'TOLLGATE_CREDENTIAL_BETA')`, a.TeamID); err != nil {
		t.Fatal(err)
	}
	page := acme.get("/console/routes")
	if !page.has("route-disabled") || !strings.Contains(page.doc.Find(`[data-prefix="/raw"]`).Text(), "not granted to team acme") {
		t.Errorf("the stored route is not shown disabled with its reason: %s", page.doc.Find(`[data-prefix="/raw"]`).Text())
	}
}
