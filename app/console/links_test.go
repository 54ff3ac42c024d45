package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

func TestSetupLinkWorksOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, _, err := e.st.CreateSetupLink(t.Context(), store.ActorCLI)
	if err != nil {
		t.Fatal(err)
	}
	path := "/console/setup/" + token
	c := e.client()

	r := c.get(path)
	wantStatus(t, "open the setup link", r, http.StatusOK)
	if !r.has("setup") || r.header.Get("Cache-Control") != "no-store" || r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("setup page: form %v, Cache-Control %q, Referrer-Policy %q", r.has("setup"),
			r.header.Get("Cache-Control"), r.header.Get("Referrer-Policy"))
	}
	// A refused form keeps the link usable and the typed values.
	r = c.post(path, url.Values{"team": {"Acme Inc"}, "email": {"owner@acme.test"}, "password": {password}})
	wantStatus(t, "bad team name", r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.text("form-error"), "team name") || r.doc.Find("#email").AttrOr("value", "") != "owner@acme.test" {
		t.Errorf("refused setup: error %q, email kept %q", r.text("form-error"), r.doc.Find("#email").AttrOr("value", ""))
	}
	r = c.post(path, url.Values{"team": {"acme"}, "email": {"owner@acme.test"}, "password": {password}, "role": {"owner"}})
	wantStatus(t, "setup with an extra field", r, http.StatusBadRequest)

	wantRedirect(t, "setup", c.post(path, url.Values{"team": {"acme"}, "email": {"owner@acme.test"}, "password": {password}}), "/console/")
	if r := c.get("/console/"); r.text("whoami") != "owner@acme.test" || r.text("team") != "acme" {
		t.Errorf("after setup: whoami %q team %q, want the new owner of acme", r.text("whoami"), r.text("team"))
	}
	if r := c.get("/console/members"); r.status != http.StatusOK {
		t.Errorf("the new owner on /console/members: %d", r.status)
	}

	// Used: the link says setup is done, for a page view and for a post; an
	// unknown one is gone.
	other := e.client()
	for _, r := range []response{
		other.get(path),
		other.post(path, url.Values{"team": {"beta"}, "email": {"eve@beta.test"}, "password": {password}}),
	} {
		if r.status != http.StatusGone || !r.has("setup-done") {
			t.Errorf("used setup link: %d, want 410 with the setup-done page", r.status)
		}
	}
	if r := other.get("/console/setup/not-a-token"); r.status != http.StatusNotFound || !r.has("link-gone") {
		t.Errorf("unknown setup link: %d, want 404 with the link-gone page", r.status)
	}
	if teams, _ := e.st.Teams(t.Context()); len(teams) != 1 {
		t.Errorf("%d teams after reusing the setup link, want 1", len(teams))
	}
}

func TestInviteWorksOnceAndExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")

	// Without HTMX the invite leads to the members page, with the link once.
	wantRedirect(t, "invite", owner.post("/console/members/invite", url.Values{"email": {"ada@acme.test"}, "role": {"member"}}), "/console/members")
	r := owner.get("/console/members")
	link := r.text("invite-link")
	if !strings.HasPrefix(link, e.srv.URL+"/console/invite/") || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("invite link %q, Cache-Control %q", link, r.header.Get("Cache-Control"))
	}
	if r := owner.get("/console/members"); strings.Contains(r.body, link) || !strings.Contains(r.text("pending-invites"), "ada@acme.test") {
		t.Errorf("members page after the invite: shows the link again %v, pending %q", strings.Contains(r.body, link), r.text("pending-invites"))
	}
	path := strings.TrimPrefix(link, e.srv.URL)

	ada := e.client()
	r = ada.get(path)
	if r.status != http.StatusOK || r.doc.Find("#email").AttrOr("value", "") != "ada@acme.test" || !strings.Contains(r.body, "acme") {
		t.Fatalf("invite page: %d, email %q", r.status, r.doc.Find("#email").AttrOr("value", ""))
	}
	wantStatus(t, "short password", ada.post(path, url.Values{"password": {"short"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "extra field", ada.post(path, url.Values{"password": {password}, "role": {"owner"}}), http.StatusBadRequest)
	wantRedirect(t, "accept", ada.post(path, url.Values{"password": {password}}), "/console/")
	home := ada.get("/console/")
	if home.text("whoami") != "ada@acme.test" || home.has("cut-off") {
		t.Errorf("after accepting: whoami %q", home.text("whoami"))
	}
	if r := ada.get("/console/members"); r.status != http.StatusForbidden {
		t.Errorf("invited member on an owner page: %d, want 403", r.status)
	}
	if r := e.client().post(path, url.Values{"password": {password}}); r.status != http.StatusNotFound {
		t.Errorf("second use of the invite: %d, want 404", r.status)
	}

	// An expired invite is gone too.
	r = owner.htmx("/console/members/invite", url.Values{"email": {"late@acme.test"}, "role": {"member"}})
	late := strings.TrimPrefix(r.text("invite-link"), e.srv.URL)
	if _, err := e.pool.Exec(t.Context(), "UPDATE invite SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if r := e.client().get(late); r.status != http.StatusNotFound || !r.has("link-gone") {
		t.Errorf("expired invite page: %d, want 404", r.status)
	}
	if r := e.client().post(late, url.Values{"password": {password}}); r.status != http.StatusNotFound {
		t.Errorf("expired invite accepted: %d, want 404", r.status)
	}
	// An invite is not a setup link.
	r = owner.htmx("/console/members/invite", url.Values{"email": {"bob@acme.test"}, "role": {"member"}})
	token := strings.TrimPrefix(r.text("invite-link"), e.srv.URL+"/console/invite/")
	if r := e.client().get("/console/setup/" + token); r.status != http.StatusNotFound {
		t.Errorf("invite token on the setup page: %d, want 404", r.status)
	}

	// A refused invite re-renders its section with the message (422, swapped by HTMX).
	r = owner.htmx("/console/members/invite", url.Values{"email": {o.Email}, "role": {"member"}})
	if r.status != http.StatusUnprocessableEntity || r.doc.Find("body > section#invite").Length() != 1 || !r.has("form-error") {
		t.Errorf("inviting an existing account: %d, want 422 with the invite section and its error\n%s", r.status, r.body)
	}
}
