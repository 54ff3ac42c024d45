package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestRemoveMember: an owner removes a member from the member page after a
// confirmation page (no JavaScript needed): the member's session ends, their
// key is revoked, and the members table keeps them as "Removed" with nothing
// left to press. Nobody removes themselves. A member added without a way in
// (by the CLI or the API) is listed as "Invited", not "Active".
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")
	_, keyID := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))
	if _, err := e.st.AddMember(t.Context(), store.ActorCLI, m.TeamID, "bob@acme.test", store.RoleMember); err != nil {
		t.Fatal(err)
	}
	members := owner.get("/console/members")
	if href, _ := members.doc.Find(`[data-testid="api-reference-link"]`).Attr("href"); href != "/api/v1/reference" {
		t.Errorf("the console links the API reference at %q, want /api/v1/reference", href)
	}
	for email, want := range map[string]string{"ada@acme.test": "Active", "bob@acme.test": "Invited"} {
		if got := members.doc.Find(`[data-testid="member-row"][data-email="` + email + `"] [data-testid="member-status"]`).Text(); got != want {
			t.Errorf("%s is listed %q, want %q", email, got, want)
		}
	}

	page := "/console/members/" + strconv.FormatInt(m.ID, 10)
	if r := owner.get(page); !r.has("remove-member") {
		t.Fatalf("the member page has no remove button:\n%.800s", r.body)
	}
	before := e.auditCount()
	r := owner.post(page+"/remove", nil)
	if !r.has("confirm") || e.auditCount() != before || !strings.Contains(r.text("confirm"), "cannot be undone") {
		t.Fatalf("unconfirmed removal: %d, confirm page %v, audit rows %d", r.status, r.has("confirm"), e.auditCount()-before)
	}
	wantRedirect(t, "confirmed removal", owner.post(page+"/remove", url.Values{"confirm": {"yes"}}), "/console/members")
	if r := ada.get("/console/"); r.status != http.StatusSeeOther {
		t.Errorf("ada's session after her removal: %d, want a redirect to sign in", r.status)
	}
	if got := e.keyState(keyID); got != "revoked" {
		t.Errorf("ada's key after her removal is %q, want revoked", got)
	}
	row := owner.get("/console/members").doc.Find(`[data-testid="member-row"][data-email="ada@acme.test"]`)
	if got := row.Find(`[data-testid="member-status"]`).Text(); got != "Removed" || row.Find("button").Length() != 0 {
		t.Errorf("ada's row after removal: %q with %d buttons, want Removed and none", got, row.Find("button").Length())
	}
	if r := owner.get(page); r.has("remove-member") {
		t.Error("a removed member's page still offers to remove them")
	}
	if r := owner.post(page+"/remove", url.Values{"confirm": {"yes"}}); r.status != http.StatusConflict {
		t.Errorf("removing twice: %d, want 409", r.status)
	}
	self := "/console/members/" + strconv.FormatInt(o.ID, 10) + "/remove"
	before = e.auditCount()
	if r := owner.post(self, url.Values{"confirm": {"yes"}}); r.status != http.StatusBadRequest || e.auditCount() != before {
		t.Errorf("owner removes themselves: %d, want 400 and nothing written", r.status)
	}
}
