package console_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/store"
)

// TestOwnerManagesAdminTokens: an owner makes an admin token on the console
// (its secret shown once, and it authenticates as the team's token of that
// role), sees it listed with its creator and last use, and revokes it after a
// confirmation; each change audited as the owner. Members, other teams and
// the deployment's tokens are out of reach.
func TestOwnerManagesAdminTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	owner, o := e.owner("acme", "owner@acme.test")
	member, _ := e.invite(owner, "ada@acme.test")

	if r := member.get("/console/team/tokens"); r.status != http.StatusForbidden {
		t.Errorf("a member opens the tokens page: %d, want 403", r.status)
	}
	if r := member.post("/console/team/tokens", url.Values{"name": {"sneaky"}, "role": {"owner"}, "expires_days": {"30"}}); r.status != http.StatusForbidden {
		t.Errorf("a member makes a token: %d, want 403", r.status)
	}
	if !owner.get("/console/members").has("admin-tokens-link") {
		t.Error("the members page does not link to the tokens page")
	}

	// A plain form post: redirected, the secret on the page it leads to, once.
	wantRedirect(t, "create", owner.post("/console/team/tokens", url.Values{"name": {"ci-deploy"}, "role": {"read"}, "expires_days": {"30"}}),
		"/console/team/tokens")
	page := owner.get("/console/team/tokens")
	wantStatus(t, "tokens page", page, http.StatusOK)
	secret := page.text("admin-token-secret")
	if !strings.HasPrefix(secret, "tga_") {
		t.Fatalf("the new token's secret is %q, want a tga_ token", secret)
	}
	if again := owner.get("/console/team/tokens"); again.has("admin-token-secret") || strings.Contains(again.body, secret) {
		t.Error("the secret is shown a second time")
	}
	tok, err := e.st.AuthenticateAdminToken(ctx, secret)
	if err != nil {
		t.Fatalf("the shown secret does not authenticate: %v", err)
	}
	if tok.TeamID == nil || *tok.TeamID != o.TeamID || tok.Role != store.TokenRoleRead || tok.Name != "ci-deploy" ||
		time.Until(tok.ExpiresAt) > 30*24*time.Hour || time.Until(tok.ExpiresAt) < 29*24*time.Hour {
		t.Errorf("token %+v, want acme's read token ci-deploy expiring in 30 days", tok)
	}
	row := owner.get("/console/team/tokens").doc.Find(`[data-testid="admin-token"][data-id="` + tok.ID + `"]`)
	cells := row.Find("td").Map(func(_ int, s *goquery.Selection) string { return strings.TrimSpace(s.Text()) })
	if len(cells) != 8 || !strings.HasPrefix(cells[0], "ci-deploy") || cells[1] != "read" || cells[2] != "active" ||
		cells[3] != tok.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") || cells[4] == "never" || cells[5] != "owner@acme.test" ||
		cells[6] != "owner@acme.test" {
		t.Errorf("listed as %q, want name, role, active, expiry, a last use, its owner's and its creator's email", cells)
	}

	// HTMX: the section comes back with the secret; a refused form keeps its values.
	r := owner.htmx("/console/team/tokens", url.Values{"name": {"terraform"}, "role": {"owner"}, "expires_days": {"365"}})
	wantStatus(t, "create with HTMX", r, http.StatusOK)
	if !strings.HasPrefix(r.text("admin-token-secret"), "tga_") || strings.Contains(r.body, "<html") {
		t.Errorf("HTMX create answered without the section's secret:\n%.400s", r.body)
	}
	before := e.auditCount()
	r = owner.post("/console/team/tokens", url.Values{"name": {""}, "role": {"owner"}, "expires_days": {"30"}})
	wantStatus(t, "create without a name", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.body, "token name must be 1 to 100 characters") {
		t.Errorf("no name: the page does not say why:\n%.600s", r.body)
	}
	wantStatus(t, "an expiry past a year", owner.post("/console/team/tokens", url.Values{"name": {"x"}, "role": {"read"}, "expires_days": {"400"}}),
		http.StatusUnprocessableEntity)
	wantStatus(t, "no expiry", owner.post("/console/team/tokens", url.Values{"name": {"x"}, "role": {"read"}}), http.StatusUnprocessableEntity)
	if e.auditCount() != before {
		t.Error("a refused create wrote an audit row")
	}

	// Another team's owner, and the deployment's token, are out of reach.
	other, _ := e.owner("beta", "owner@beta.test")
	if strings.Contains(other.get("/console/team/tokens").body, tok.ID) {
		t.Error("another team's owner sees acme's token")
	}
	revokePath := "/console/team/tokens/" + tok.ID + "/revoke"
	if r := other.post(revokePath, url.Values{"confirm": {"yes"}}); r.status != http.StatusNotFound {
		t.Errorf("another team's owner revokes acme's token: %d, want 404", r.status)
	}
	deployment, err := e.st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{Name: "prices", Role: store.TokenRoleOwner, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r := owner.post("/console/team/tokens/"+deployment.ID+"/revoke", url.Values{"confirm": {"yes"}}); r.status != http.StatusNotFound {
		t.Errorf("an owner revokes the deployment's token: %d, want 404", r.status)
	}
	if strings.Contains(owner.get("/console/team/tokens").body, deployment.ID) {
		t.Error("the deployment's token is listed on a team's page")
	}

	// Revoke: confirmed first, then refused at once, listed as revoked.
	confirm := owner.post(revokePath, url.Values{})
	wantStatus(t, "revoke unconfirmed", confirm, http.StatusOK)
	if _, err := e.st.AuthenticateAdminToken(ctx, secret); err != nil {
		t.Fatalf("the confirmation page revoked the token: %v", err)
	}
	wantRedirect(t, "revoke", owner.post(revokePath, url.Values{"confirm": {"yes"}}), "/console/team/tokens")
	if _, err := e.st.AuthenticateAdminToken(ctx, secret); !errors.As(err, new(*store.TokenError)) {
		t.Errorf("the revoked token authenticates: %v", err)
	}
	row = owner.get("/console/team/tokens").doc.Find(`[data-testid="admin-token"][data-id="` + tok.ID + `"]`)
	if state := strings.TrimSpace(row.Find("td").Eq(2).Text()); state != "revoked" || row.Find("form").Length() != 0 {
		t.Errorf("the revoked token is listed as %q with %d forms, want revoked without a Revoke button", state, row.Find("form").Length())
	}
	if r := owner.post(revokePath, url.Values{"confirm": {"yes"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "already revoked") {
		t.Errorf("revoking twice: %d, want 409 saying it is revoked already", r.status)
	}

	// Audited as the owner, with the same actions the CLI writes.
	entries, err := e.st.Audit(ctx, &o.TeamID, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, a := range entries {
		if a.Target == tok.ID || a.Action == store.ActionAdminTokenCreate {
			if a.Actor != string(store.MemberActor(o.ID)) {
				t.Errorf("%s audited as %q, want the owner", a.Action, a.Actor)
			}
			got[a.Action]++
		}
	}
	if got[store.ActionAdminTokenCreate] != 2 || got[store.ActionAdminTokenRevoke] != 1 {
		t.Errorf("audit %v, want two creations and one revocation", got)
	}
}
