package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestWebhooksPage: an owner adds a signed webhook from the members page's
// link and sees its secret once; a metadata URL is refused with a message on
// the page; a member cannot open the page.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	member, _ := e.invite(owner, "ada@acme.test")
	if r := owner.get("/console/members"); r.doc.Find(`[data-testid="webhooks-link"]`).AttrOr("href", "") != "/console/team/webhooks" {
		t.Fatal("the members page does not link to the webhooks page")
	}
	r := owner.htmx("/console/team/webhooks", url.Values{"name": {"meta"}, "url": {"http://169.254.169.254/latest/"}, "format": {"slack"}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.doc.Find(`[role="alert"], .error`).Text()+r.body, "link-local") {
		t.Fatalf("metadata URL: %d\n%.1500s", r.status, r.body)
	}
	if r := owner.post("/console/team/webhooks", url.Values{"name": {"ops"}, "url": {"http://127.0.0.1:9/hook"}, "format": {"signed"}}); r.status != http.StatusSeeOther {
		t.Fatalf("adding: %d\n%.1500s", r.status, r.body)
	}
	r = owner.get("/console/team/webhooks")
	secret := strings.TrimSpace(r.doc.Find(`[data-testid="webhook-secret"]`).Text())
	if r.status != http.StatusOK || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("after adding: %d, secret %q\n%.1500s", r.status, secret, r.body)
	}
	r = owner.get("/console/team/webhooks")
	if r.doc.Find(`[data-testid="webhook-secret"]`).Length() != 0 || strings.Contains(r.body, secret) {
		t.Fatal("the secret is shown twice")
	}
	if got := strings.TrimSpace(r.doc.Find(`[data-testid="webhook"] td`).First().Text()); got != "ops" {
		t.Fatalf("listed %q", got)
	}
	if r := member.get("/console/team/webhooks"); r.status != http.StatusForbidden && r.status != http.StatusNotFound {
		t.Fatalf("a member opens the webhooks page: %d", r.status)
	}
}
