package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestOwnerReissuesAndRevokesInvites: a pending invite can be replaced by a
// new link (the old one stops working) or taken back, each audited.
func TestOwnerReissuesAndRevokesInvites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	first := owner.htmx("/console/members/invite", url.Values{"email": {"ada@acme.test"}, "role": {"owner"}}).text("invite-link")
	if first == "" {
		t.Fatal("no invite link")
	}
	members := owner.get("/console/members")
	if members.doc.Find(`[data-testid="pending-invite"][data-email="ada@acme.test"] [data-testid="reissue-invite"]`).Length() != 1 ||
		members.doc.Find(`[data-testid="pending-invite"][data-email="ada@acme.test"] [data-testid="revoke-invite"]`).Length() != 1 {
		t.Fatal("the pending invite offers no New link and Revoke buttons")
	}

	wantRedirect(t, "reissue", owner.post("/console/members/invites/reissue", url.Values{"email": {"ada@acme.test"}}), "/console/members#invite")
	second := owner.get("/console/members").text("invite-link")
	if second == "" || second == first {
		t.Fatalf("after reissue the members page shows link %q (first %q)", second, first)
	}
	if owner.get("/console/members").has("invite-link") {
		t.Error("the reissued link is shown twice")
	}
	if r := e.client().get(strings.TrimPrefix(first, e.srv.URL)); r.status != http.StatusNotFound {
		t.Errorf("the replaced link: %d, want 404", r.status)
	}
	if r := e.client().get(strings.TrimPrefix(second, e.srv.URL)); r.status != http.StatusOK || !strings.Contains(r.body, "as owner") {
		t.Errorf("the new link: %d, want 200 inviting as owner (the role kept)", r.status)
	}

	wantRedirect(t, "revoke", owner.post("/console/members/invites/revoke", url.Values{"email": {"ada@acme.test"}}), "/console/members#invite")
	if r := e.client().get(strings.TrimPrefix(second, e.srv.URL)); r.status != http.StatusNotFound {
		t.Errorf("the revoked link: %d, want 404", r.status)
	}
	if owner.get("/console/members").has("pending-invite") {
		t.Error("the revoked invite is still listed")
	}
	for _, path := range []string{"/console/members/invites/revoke", "/console/members/invites/reissue"} {
		if r := owner.post(path, url.Values{"email": {"ada@acme.test"}}); r.status != http.StatusNotFound {
			t.Errorf("POST %s with nothing pending: %d, want 404", path, r.status)
		}
	}
	// Another team's owner cannot touch this team's invites.
	owner.htmx("/console/members/invite", url.Values{"email": {"bob@acme.test"}, "role": {"member"}})
	other, _ := e.owner("beta", "owner@beta.test")
	if r := other.post("/console/members/invites/revoke", url.Values{"email": {"bob@acme.test"}}); r.status != http.StatusNotFound {
		t.Errorf("another team's owner revokes an invite: %d, want 404", r.status)
	}
	var invites []string
	for _, a := range e.auditActions(o.TeamID) {
		if strings.HasPrefix(a, "invite.") {
			invites = append(invites, a)
		}
	}
	if want := []string{"invite.create", "invite.reissue", "invite.revoke", "invite.create"}; !slices.Equal(invites, want) {
		t.Errorf("audited invite actions %v, want %v", invites, want)
	}
}

// TestMembersShowSignInFromLinks: an owner who made the team through the setup
// link and a member who joined through an invite were signed in by those links
// with the password they chose there; the members page says so, not "—" (the
// sign-in column used to count the sign-in form only, which neither had used).
func TestMembersShowSignInFromLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, _, err := e.st.CreateSetupLink(t.Context(), store.ActorCLI)
	if err != nil {
		t.Fatal(err)
	}
	owner := e.client()
	wantRedirect(t, "setup", owner.post("/console/setup/"+token,
		url.Values{"team": {"acme"}, "email": {"owner@acme.test"}, "password": {password}}), "/console/")
	link := owner.htmx("/console/members/invite", url.Values{"email": {"ada@acme.test"}, "role": {"member"}}).text("invite-link")
	wantRedirect(t, "accept the invite", e.client().post(strings.TrimPrefix(link, e.srv.URL), url.Values{"password": {password}}), "/console/")

	members := owner.get("/console/members")
	for _, email := range []string{"owner@acme.test", "ada@acme.test"} {
		if got := strings.TrimSpace(members.doc.Find(`tr[data-email="` + email + `"] [data-testid="member-sign-in"]`).Text()); got != "password" {
			t.Errorf("%s's sign-in column: %q, want password", email, got)
		}
	}
}
