package console_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestInviteWithoutJavaScriptIsShownOnce: the invite form posted without HTMX
// redirects to the members page, which shows the link once; a reload makes no
// second invite and shows no link.
func TestInviteWithoutJavaScriptIsShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	before := e.auditCount()
	wantRedirect(t, "invite without HTMX", owner.post("/console/members/invite", url.Values{"email": {"ada@acme.test"}, "role": {"member"}}),
		"/console/members")
	page := owner.get("/console/members")
	wantStatus(t, "members page", page, http.StatusOK)
	if page.text("invite-link") == "" {
		t.Fatal("the members page after an invite shows no link")
	}
	if again := owner.get("/console/members"); again.has("invite-link") {
		t.Error("reloading the members page shows the invite link again")
	}
	if n := e.auditCount() - before; n != 1 {
		t.Errorf("%d audit rows after one invite and a reload, want 1", n)
	}
	// A refused invite is the form again, with its message.
	if r := owner.post("/console/members/invite", url.Values{"email": {"not an email"}, "role": {"member"}}); r.status != http.StatusUnprocessableEntity || !r.has("form-error") {
		t.Errorf("a bad invite without HTMX: %d, want 422 with the message", r.status)
	}
}
