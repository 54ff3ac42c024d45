package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// keyOf returns the one key a response revealed.
func keyOf(t *testing.T, r response) (plaintext, id string) {
	t.Helper()
	plaintext = r.text("new-key-value")
	if !strings.HasPrefix(plaintext, "tg_") {
		t.Fatalf("response (%d) reveals no key:\n%.800s", r.status, r.body)
	}
	return plaintext, strings.Split(plaintext, "_")[1]
}

func (e *env) keyState(id string) string {
	e.t.Helper()
	for _, k := range e.keys() {
		if k.ID == id {
			return k.State(time.Now())
		}
	}
	e.t.Fatalf("no key %s", id)
	return ""
}

func (e *env) keys() []store.Key {
	e.t.Helper()
	teams, err := e.st.Teams(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	var keys []store.Key
	for _, team := range teams {
		k, err := e.st.Keys(e.t.Context(), team.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		keys = append(keys, k...)
	}
	return keys
}

func TestKeyPlaintextIsShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")

	r := ada.htmx("/console/keys", url.Values{"name": {"laptop"}})
	wantStatus(t, "create a key", r, http.StatusOK)
	if r.doc.Find("body > section#keys").Length() != 1 || r.doc.Find("body > *").Length() != 1 {
		t.Errorf("HTMX create answered more than its swap target, section#keys:\n%.400s", r.body)
	}
	if vary := strings.Join(r.header.Values("Vary"), ", "); r.header.Get("Cache-Control") != "no-store" || !strings.Contains(vary, "HX-Request") {
		t.Errorf("key response: Cache-Control %q, Vary %q", r.header.Get("Cache-Control"), vary)
	}
	plaintext, id := keyOf(t, r)
	if r.doc.Find(`[data-testid="key-row"][data-key-id="`+id+`"]`).Length() != 1 {
		t.Error("the new key is not listed")
	}
	// Without HTMX, a redirect to the member's page, which shows the key once:
	// reloading it neither shows the key again nor creates another.
	wantRedirect(t, "create a key without HTMX", ada.post("/console/keys", url.Values{"name": {"ci"}}), "/console/")
	page := ada.get("/console/")
	second, _ := keyOf(t, page)
	if !page.has("snippets") {
		t.Error("creating a key without HTMX did not lead to the member page")
	}
	if again := ada.get("/console/"); again.has("new-key") || strings.Contains(again.body, second) {
		t.Error("reloading the page after creating a key shows its plaintext again")
	}
	if n := len(e.keys()); n != 2 {
		t.Errorf("%d keys after two creations and a reload, want 2", n)
	}

	memberURL := "/console/members/" + strconv.FormatInt(m.ID, 10)
	for who, c := range map[string]*client{"member": ada, "owner": owner} {
		for _, path := range []string{"/console/", "/console/members", memberURL, "/console/routes", "/console/audit"} {
			body := c.get(path).body
			for _, secret := range []string{plaintext, second} {
				if strings.Contains(body, secret[len(secret)-20:]) {
					t.Errorf("%s GET %s shows a key's secret after its creation", who, path)
				}
			}
		}
	}
	var logs = e.logs.String()
	if strings.Contains(logs, plaintext[len(plaintext)-20:]) {
		t.Error("the log holds a key's secret")
	}
}

func TestKeyCreationTakesOnlyAName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	ada, _ := e.invite(owner, "ada@acme.test")
	before := e.auditCount()
	for _, extra := range []url.Values{
		{"member_id": {strconv.FormatInt(o.ID, 10)}},
		{"budget_micros": {"999999999"}},
		{"rate_limit": {"100000"}},
		{"route": {"/anthropic"}},
		{"role": {"owner"}},
		{"team_id": {"1"}},
	} {
		form := url.Values{"name": {"sneaky"}}
		for k, v := range extra {
			form[k] = v
		}
		if r := ada.htmx("/console/keys", form); r.status != http.StatusBadRequest {
			t.Errorf("create key with %v: %d, want 400", extra, r.status)
		}
	}
	if n := len(e.keys()); n != 0 || e.auditCount() != before {
		t.Errorf("refused key creations left %d keys and %d audit rows", n, e.auditCount()-before)
	}
	r := ada.htmx("/console/keys", url.Values{"name": {strings.Repeat("x", 101)}})
	if r.status != http.StatusUnprocessableEntity || !r.has("form-error") || r.has("new-key") {
		t.Errorf("too long a name: %d, want 422 with the message and no key", r.status)
	}
}

func TestAnotherMembersKeyIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, _ := e.invite(owner, "ada@acme.test")
	bob, _ := e.invite(owner, "bob@acme.test")
	_, bobsKey := keyOf(t, bob.htmx("/console/keys", url.Values{"name": {"bob"}}))
	otherOwner, _ := e.owner("beta", "owner@beta.test")

	before := e.auditCount()
	for who, c := range map[string]*client{"another member": ada, "another team's owner": otherOwner} {
		for _, action := range []string{"rotate", "revoke"} {
			for _, htmx := range []bool{false, true} {
				form := url.Values{"confirm": {"yes"}}
				r := c.post("/console/keys/"+bobsKey+"/"+action, form)
				if htmx {
					r = c.htmx("/console/keys/"+bobsKey+"/"+action, form)
				}
				if r.status != http.StatusNotFound || strings.Contains(r.body, bobsKey) {
					t.Errorf("%s %ss bob's key (htmx %v): %d, want 404 that does not echo the id", who, action, htmx, r.status)
				}
			}
		}
		if strings.Contains(c.get("/console/").body, bobsKey) {
			t.Errorf("%s's page lists bob's key", who)
		}
	}
	if e.auditCount() != before || e.keyState(bobsKey) != "active" || len(e.keys()) != 1 {
		t.Errorf("refused key actions changed something: %d audit rows, key %s", e.auditCount()-before, e.keyState(bobsKey))
	}
}

func TestRotateAndRevokeAskFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")
	first, id := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))

	// Without JavaScript a confirmation page comes first, and nothing changes.
	before := e.auditCount()
	r := ada.post("/console/keys/"+id+"/rotate", url.Values{})
	if r.status != http.StatusOK || !r.has("confirm") || !strings.Contains(r.text("confirm"), "keeps working until") {
		t.Fatalf("rotate without confirm: %d, want the confirmation page naming the grace end", r.status)
	}
	if e.auditCount() != before {
		t.Fatal("an unconfirmed rotate changed something")
	}
	r = ada.htmx("/console/keys/"+id+"/rotate", url.Values{"confirm": {"yes"}})
	second, newID := keyOf(t, r)
	if second == first || r.text("old-until") == "" {
		t.Errorf("rotate: new key %v, old key until %q", second != first, r.text("old-until"))
	}
	old := r.doc.Find(`[data-key-id="` + id + `"]`)
	if old.Find(`[data-testid="key-state"]`).Text() != "grace" || old.Find(`[data-testid="grace-until"]`).Text() == "" {
		t.Errorf("rotated key row: state %q until %q", old.Find(`[data-testid="key-state"]`).Text(), old.Find(`[data-testid="grace-until"]`).Text())
	}

	if r := ada.post("/console/keys/"+newID+"/revoke", url.Values{}); !r.has("confirm") {
		t.Error("revoke without confirm did not ask")
	}
	r = ada.htmx("/console/keys/"+newID+"/revoke", url.Values{"confirm": {"yes"}})
	if s := r.doc.Find(`[data-key-id="` + newID + `"] [data-testid="key-state"]`).Text(); r.status != http.StatusOK || s != "revoked" {
		t.Errorf("revoke: %d, state %q", r.status, s)
	}
	if r := ada.htmx("/console/keys/"+newID+"/revoke", url.Values{"confirm": {"yes"}}); r.status != http.StatusConflict ||
		r.body != "key "+newID+" is already revoked" {
		t.Errorf("revoke twice: %d %q, want 409 saying it is already revoked", r.status, r.body)
	}
	if r := ada.post("/console/keys/"+newID+"/revoke", url.Values{"confirm": {"yes"}}); r.status != http.StatusConflict ||
		r.text("form-error") != "key "+newID+" is already revoked" || !r.has("keys") {
		t.Errorf("revoke twice without HTMX: %d %q, want 409 with the keys and the message", r.status, r.text("form-error"))
	}

	// An owner rotates and revokes a member's key from the member's page.
	r = owner.htmx("/console/keys/"+id+"/revoke", url.Values{"confirm": {"yes"}})
	if r.status != http.StatusOK || r.doc.Find(`[data-key-id="`+id+`"] [data-testid="key-state"]`).Text() != "revoked" {
		t.Errorf("owner revokes a member's key: %d\n%.500s", r.status, r.body)
	}
	_, third := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"again"}}))
	memberPage := "/console/members/" + strconv.FormatInt(m.ID, 10)
	wantRedirect(t, "an owner's rotate without HTMX", owner.post("/console/keys/"+third+"/rotate", url.Values{"confirm": {"yes"}}), memberPage)
	page := owner.get(memberPage)
	if _, _ = keyOf(t, page); page.text("whoami") != "owner@acme.test" || !strings.Contains(page.body, m.Email) {
		t.Error("an owner's rotate without HTMX did not lead to the member's page")
	}
	if owner.get(memberPage).has("new-key") {
		t.Error("the member's page shows the rotated key twice")
	}
}

// TestKeysShowLastUseAndRequestsTheirKey: a key's row says when it last made
// a request (as the ledger's batches record it), and each recent request says
// which key made it.
func TestKeysShowLastUseAndRequestsTheirKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")
	_, laptop := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))
	_, ci := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"ci"}}))
	at := time.Now().Add(-time.Minute).UTC()
	if err := e.st.WriteLedger(t.Context(), []proxy.LedgerEntry{{TeamID: m.TeamID, MemberID: m.ID, KeyID: laptop, RequestID: "r1",
		Model: "claude-haiku-4-5", Status: proxy.LedgerSettled, HTTPStatus: 200, CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	for who, page := range map[string]response{"member": ada.get("/console/"), "owner": owner.get("/console/members/" + strconv.FormatInt(m.ID, 10))} {
		lastUsed := func(id string) string {
			return strings.TrimSpace(page.doc.Find(`[data-key-id="` + id + `"] [data-testid="key-last-used"]`).Text())
		}
		if lastUsed(laptop) == "never" || lastUsed(laptop) == "" || lastUsed(ci) != "never" {
			t.Errorf("%s's view: laptop last used %q, ci %q", who, lastUsed(laptop), lastUsed(ci))
		}
		if got := strings.Join(strings.Fields(page.text("recent-key")), " "); got != "laptop "+laptop {
			t.Errorf("%s's view: the recent request's key shows %q, want laptop %s", who, got, laptop)
		}
	}
}
