package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/console"
)

// setCookies are the Set-Cookie headers of r, parsed.
func setCookies(r response) []*http.Cookie {
	return (&http.Response{Header: r.header}).Cookies()
}

func TestSessionCookieOverTLS(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	token, _, err := e.st.CreateSetupLink(t.Context(), "cli")
	if err != nil {
		t.Fatal(err)
	}
	c := e.client()
	r := c.post("/console/setup/"+token, url.Values{"team": {"acme"}, "email": {"owner@acme.test"}, "password": {password}})
	wantRedirect(t, "setup over TLS", r, "/console/")
	cookies := setCookies(r)
	if len(cookies) != 1 {
		t.Fatalf("sign-in set %d cookies, want 1: %v", len(cookies), r.header.Values("Set-Cookie"))
	}
	ck := cookies[0]
	if ck.Name != "__Host-tollgate" || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
		t.Errorf("session cookie = %s, want __Host-tollgate; Secure; HttpOnly; SameSite=Lax; Path=/; no Domain", r.header.Get("Set-Cookie"))
	}
	if r := c.get("/console/"); r.status != http.StatusOK || r.text("whoami") != "owner@acme.test" {
		t.Errorf("GET /console/ over TLS with the cookie: %d, whoami %q", r.status, r.text("whoami"))
	}
}

func TestSessionCookieOverPlainHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, _, _ := e.st.CreateSetupLink(t.Context(), "cli")
	r := e.client().post("/console/setup/"+token, url.Values{"team": {"acme"}, "email": {"owner@acme.test"}, "password": {password}})
	ck := setCookies(r)[0]
	if ck.Name != "tollgate" || ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" {
		t.Errorf("session cookie over http = %s, want tollgate; HttpOnly; SameSite=Lax; Path=/ (a Secure or __Host- cookie would be dropped)", r.header.Get("Set-Cookie"))
	}
}

func TestSignInRotatesAndSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	e.invite(owner, "ada@acme.test")
	c := e.client()

	signin := c.get("/console/signin")
	wantStatus(t, "sign-in page", signin, http.StatusOK)
	if cc := signin.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("sign-in page Cache-Control = %q, want no-store", cc)
	}
	if c.cookie() != "" {
		t.Error("the sign-in page started a session before sign-in")
	}
	wantRedirect(t, "sign in", c.post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {password}}), "/console/")
	first := c.cookie()

	// Signing in again, as someone else, gets a new session id; the old one is gone.
	wantRedirect(t, "sign in again", c.post("/console/signin", url.Values{"email": {"ADA@acme.test"}, "password": {password}}), "/console/")
	second := c.cookie()
	if first == "" || second == "" || first == second {
		t.Fatalf("session ids %q then %q, want a new one at each sign-in", first, second)
	}
	if r := c.get("/console/"); r.text("whoami") != "ada@acme.test" {
		t.Errorf("after the second sign-in whoami = %q", r.text("whoami"))
	}
	if r := withCookie(e, first).get("/console/"); r.status != http.StatusSeeOther {
		t.Errorf("the session id from before the second sign-in: %d, want refused (303 to sign-in)", r.status)
	}

	wantRedirect(t, "sign out", c.post("/console/signout", url.Values{}), "/console/signin?signed_out")
	if r := c.get("/console/signin?signed_out"); r.text("signed-out") != "Signed out." {
		t.Errorf("the page after signing out says %q, want Signed out.", r.text("signed-out"))
	}
	if c.get("/console/signin").has("signed-out") {
		t.Error("the plain sign-in page says Signed out")
	}
	if r := withCookie(e, second).get("/console/"); r.status != http.StatusSeeOther {
		t.Errorf("the session id after sign-out: %d, want refused (303 to sign-in)", r.status)
	}
	if r := withCookie(e, second).htmx("/console/keys", url.Values{"name": {"x"}}); r.status != http.StatusUnauthorized {
		t.Errorf("HTMX with the signed-out session id: %d, want 401", r.status)
	}
	if !strings.Contains(e.logs.String(), "console sign-in") || strings.Contains(e.logs.String(), second) {
		t.Error("sign-ins are not logged, or a log line holds a session id")
	}
}

// withCookie is a client that presents session id value and nothing else.
func withCookie(e *env, value string) *client {
	c := e.client()
	u, _ := url.Parse(e.srv.URL)
	c.http.Jar.SetCookies(u, []*http.Cookie{{Name: "tollgate", Value: value, Path: "/"}})
	return c
}

func TestSessionExpiresWhenIdle(t *testing.T) {
	t.Parallel()
	// Seconds, not less: under -race on two busy cores, signing in and the
	// first page can take over a second, which a shorter timeout would count as idle.
	const idle = 3 * time.Second
	e := newEnv(t, func(o *console.Options) { o.SessionIdleTimeout = idle })
	owner, _ := e.owner("acme", "owner@acme.test")
	wantStatus(t, "fresh session", owner.get("/console/"), http.StatusOK)
	time.Sleep(idle + idle/2)
	wantRedirect(t, "idle session", owner.get("/console/"), "/console/signin")
}

func TestSignInFailsAlikeAndIsThrottled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *console.Options) { o.SignInLimit = console.SignInLimit{PerAccount: 3, PerAddress: 8} })
	e.owner("acme", "owner@acme.test")
	c := e.client()
	signIn := func(email, pw string) response {
		t.Helper()
		return c.post("/console/signin", url.Values{"email": {email}, "password": {pw}})
	}

	wrong := signIn("owner@acme.test", "wrong password!")
	unknown := signIn("nobody@acme.test", "wrong password!")
	for _, r := range []response{wrong, unknown} {
		if r.status != http.StatusUnauthorized || r.text("form-error") != "Wrong email or password." {
			t.Errorf("failed sign-in: %d %q, want 401 with the one generic message", r.status, r.text("form-error"))
		}
	}
	if strings.ReplaceAll(wrong.body, "owner@acme.test", "X") != strings.ReplaceAll(unknown.body, "nobody@acme.test", "X") {
		t.Error("a wrong password and an unknown email answer differently")
	}

	// The account's third failure locks it, even against the right password.
	signIn("owner@acme.test", "wrong again!!")
	signIn("owner@acme.test", "and again!!!!")
	r := signIn("owner@acme.test", password)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.text("form-error"), "Too many failed sign-ins") {
		t.Fatalf("sign-in after 3 failures: %d %q (Retry-After %q), want 429", r.status, r.text("form-error"), r.header.Get("Retry-After"))
	}
	if c.cookie() != "" {
		t.Error("a throttled sign-in started a session")
	}
	// An unknown account is throttled the same way, so throttling reveals nothing.
	signIn("nobody@acme.test", "x")
	signIn("nobody@acme.test", "x")
	if r := signIn("nobody@acme.test", "x"); r.status != http.StatusTooManyRequests {
		t.Errorf("unknown account after 3 failures: %d, want 429", r.status)
	}

	// Failures spread over accounts lock the address.
	for i := range 2 {
		signIn("spray"+string(rune('a'+i))+"@acme.test", "x")
	}
	if r := signIn("fresh@acme.test", "x"); r.status != http.StatusTooManyRequests {
		t.Errorf("a new account from an address with 8 failures: %d, want 429", r.status)
	}
}
