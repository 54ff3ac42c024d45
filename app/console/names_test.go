package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A name with a bidi override or an ESC sequence is refused with the form
// re-rendered and the message shown, and nothing is stored.
func TestHostileNamesAreRefusedWithAMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	audited := e.auditCount()

	for _, htmx := range []bool{true, false} {
		post := owner.post
		if htmx {
			post = owner.htmx
		}
		r := post("/console/members/invite", url.Values{"email": {"eve\u202emoc.liame@acme.test"}, "role": {"member"}})
		wantStatus(t, "invite a U+202E email", r, http.StatusUnprocessableEntity)
		if msg := r.text("form-error"); !strings.Contains(msg, "email must not contain control or bidirectional-text characters (it has U+202E)") {
			t.Errorf("invite a U+202E email (htmx %v): message %q", htmx, msg)
		}
		if r.has("invite-link") {
			t.Errorf("invite a U+202E email (htmx %v): a link was made", htmx)
		}

		r = post("/console/keys", url.Values{"name": {"laptop\x1b[2J\x1b]0;owned\x07"}})
		wantStatus(t, "key name with ESC", r, http.StatusUnprocessableEntity)
		if msg := r.text("form-error"); !strings.Contains(msg, "key name must not contain control or bidirectional-text characters (it has U+001B)") {
			t.Errorf("key name with ESC (htmx %v): message %q", htmx, msg)
		}
		if r.has("new-key") {
			t.Errorf("key name with ESC (htmx %v): a key was issued", htmx)
		}
	}
	if n := e.auditCount(); n != audited {
		t.Errorf("refused names wrote %d audit rows", n-audited)
	}
	if keys := e.keys(); len(keys) != 0 {
		t.Errorf("refused key names left keys: %+v", keys)
	}
}
