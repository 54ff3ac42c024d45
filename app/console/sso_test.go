package console_test

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

const oidcSecretEnv = "TOLLGATE_SSO_ACME_OIDC_SECRET"

// Ways the test provider spoils its next answers.
const (
	honest int32 = iota
	wrongNonce
	badSignature
)

// testProvider is a local OpenID provider (mockoidc) that can be made to lie.
type testProvider struct {
	*mockoidc.MockOIDC
	tamper atomic.Int32
}

func startProvider(t *testing.T) *testProvider {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &testProvider{MockOIDC: m}
	m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case p.tamper.Load() == wrongNonce && r.URL.Path == mockoidc.AuthorizationEndpoint:
				q := r.URL.Query()
				q.Set("nonce", "a-nonce-from-another-sign-in")
				r.URL.RawQuery = q.Encode()
			case p.tamper.Load() == badSignature && r.URL.Path == mockoidc.TokenEndpoint:
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r)
				var body map[string]any
				json.Unmarshal(rec.Body.Bytes(), &body)
				if tok, ok := body["id_token"].(string); ok {
					body["id_token"] = resign(t, tok)
				}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(body)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return p
}

// resign keeps a token's header and claims, with the email changed, and its
// original signature, which therefore no longer matches.
func resign(t *testing.T, token string) string {
	parts := strings.Split(token, ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Error(err)
		return token
	}
	forged := strings.Replace(string(claims), "@acme.test", "@evil.test", 1)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
}

func (p *testProvider) user(email string, verified bool) {
	p.QueueUser(&mockoidc.MockUser{Subject: "sub-" + email, Email: email, EmailVerified: verified})
}

// withSecrets gives the console the provider's client secret (and the
// route credential every env has).
func withSecrets(secrets map[string]string) option {
	return func(o *console.Options) {
		o.Getenv = func(name string) string {
			if name == "ANTHROPIC_API_KEY" {
				return providerSecret
			}
			return secrets[name]
		}
	}
}

// oidcEnv is a console whose team acme has an owner who has configured the
// test provider through the settings page with policy.
func oidcEnv(t *testing.T, p *testProvider, form url.Values, opts ...option) (*env, *client) {
	t.Helper()
	e := newEnv(t, append([]option{withSecrets(map[string]string{oidcSecretEnv: p.ClientSecret})}, opts...)...)
	owner, _ := e.owner("acme", "owner@acme.test")
	base := url.Values{"display_name": {"Acme ID"}, "issuer_url": {p.Issuer()}, "client_id": {p.ClientID},
		"join_policy": {"domains"}, "allowed_domains": {"acme.test"}, "enabled": {"on"}}
	for k, v := range form {
		base[k] = v
	}
	r := owner.post("/console/team/sign-in/sso/oidc", base)
	wantStatus(t, "save OIDC settings", r, http.StatusOK)
	return e, owner
}

// ssoCallback clicks "Sign in with …" and follows the provider's redirects
// up to the console's callback, which it returns unvisited.
func (c *client) ssoCallback(start string) *url.URL {
	c.t.Helper()
	r := c.get(start)
	if r.status != http.StatusSeeOther {
		c.t.Fatalf("start %s: %d, want 303 to the provider\n%.600s", start, r.status, r.body)
	}
	resp, err := c.http.Get(r.header.Get("Location"))
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	callback, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(callback.String(), c.e.srv.URL+"/console/") {
		c.t.Fatalf("provider answered %d to %q, want a redirect to the console's callback", resp.StatusCode, callback)
	}
	return callback
}

// ssoSignIn runs the flow and returns the callback's answer; edit may change
// the callback's query first.
func (c *client) ssoSignIn(start string, edit func(url.Values)) response {
	c.t.Helper()
	callback := c.ssoCallback(start)
	if edit != nil {
		q := callback.Query()
		edit(q)
		callback.RawQuery = q.Encode()
	}
	return c.get(callback.RequestURI())
}

func wantRefused(t *testing.T, what string, r response, status int, message string) {
	t.Helper()
	if r.status != status || !strings.Contains(r.text("form-error"), message) || !r.has("sso-button") {
		t.Fatalf("%s: %d %q, want %d with the sign-in page saying %q\n%.800s", what, r.status, r.text("form-error"), status, message, r.body)
	}
}

// TestOIDCSignIn runs the whole flow against a local OpenID provider: a
// verified email of an allowed domain joins as a member, with a fresh session
// id, and its method shows on the members page; every way the answer can be
// wrong is refused with a page saying why, and creates nobody.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	e, owner := oidcEnv(t, p, nil)
	start := "/console/signin/acme/oidc"
	signIn := e.client()
	if r := signIn.get("/console/signin"); r.text("sso-button") != "Sign in with Acme ID (acme)" {
		t.Fatalf("sign-in page buttons: %q", r.text("sso-button"))
	}

	p.user("ada@acme.test", true)
	signIn.get("/console/signin")
	planted := signIn.cookie()
	wantRedirect(t, "sign in by OIDC", signIn.ssoSignIn(start, nil), "/console/")
	if signIn.cookie() == "" || signIn.cookie() == planted {
		t.Fatal("OIDC sign-in kept the session id it started with")
	}
	if home := signIn.get("/console/"); home.status != http.StatusOK || !strings.Contains(home.body, "ada@acme.test") {
		t.Fatalf("home after OIDC sign-in: %d\n%.600s", home.status, home.body)
	}
	ada, err := e.st.FindMember(t.Context(), 1, "ada@acme.test")
	if err != nil || ada.Role != store.RoleMember || ada.SignInMethod != store.SignInOIDC {
		t.Fatalf("joined member: %+v, %v; want a member who signed in by OIDC", ada, err)
	}
	members := owner.get("/console/members")
	if got := members.doc.Find(`[data-testid="member-sign-in"]`).Eq(1).Text(); got != "OIDC" {
		t.Errorf("members page shows ada's sign-in as %q, want OIDC", got)
	}
	if got := members.doc.Find(`[data-testid="member-sign-in"]`).Eq(0).Text(); got != "password" {
		t.Errorf("members page shows the owner's sign-in as %q, want password", got)
	}

	// An owner's invite is never used up by a member's join, even at an allowed domain.
	wantStatus(t, "invite an owner", owner.htmx("/console/members/invite", url.Values{"email": {"boss@acme.test"}, "role": {"owner"}}), http.StatusOK)
	before := e.auditCount()
	p.user("boss@acme.test", true)
	wantRefused(t, "invited owner by OIDC", e.client().ssoSignIn(start, nil), http.StatusForbidden, "owners join through their invite link")
	p.user("mallory@evil.test", true)
	wantRefused(t, "disallowed domain", e.client().ssoSignIn(start, nil), http.StatusForbidden, "does not admit addresses at evil.test")
	p.user("bob@acme.test", false)
	wantRefused(t, "unverified email", e.client().ssoSignIn(start, nil), http.StatusForbidden, "has not verified the email address bob@acme.test")
	p.user("bob@acme.test", true)
	wantRefused(t, "wrong state", e.client().ssoSignIn(start, func(q url.Values) { q.Set("state", "forged") }),
		http.StatusForbidden, "not started in this browser")
	// A callback URL obtained in one browser (an attacker's) is refused in another.
	p.user("bob@acme.test", true)
	stolen := e.client().ssoCallback(start)
	wantRefused(t, "callback in another browser", e.client().get(stolen.RequestURI()), http.StatusForbidden, "not started in this browser")
	// A callback works once.
	p.user("bob@acme.test", true)
	replay := e.client()
	callback := replay.ssoCallback(start)
	replay.get("/console/signin")
	wantRedirect(t, "bob signs in", replay.get(callback.RequestURI()), "/console/")
	if r := e.client().get(callback.RequestURI()); r.status != http.StatusForbidden {
		t.Errorf("replayed callback: %d, want 403", r.status)
	}

	p.tamper.Store(wrongNonce)
	p.user("carol@acme.test", true)
	wantRefused(t, "wrong nonce", e.client().ssoSignIn(start, nil), http.StatusForbidden, "its nonce does not match")
	p.tamper.Store(badSignature)
	p.user("carol@acme.test", true)
	wantRefused(t, "forged ID token", e.client().ssoSignIn(start, nil), http.StatusForbidden, "ID token is not valid")
	p.tamper.Store(honest)
	p.FastForward(-time.Hour) // tokens issued an hour ago, expired 50 minutes ago
	p.user("carol@acme.test", true)
	wantRefused(t, "expired ID token", e.client().ssoSignIn(start, nil), http.StatusForbidden, "it has expired")
	p.FastForward(time.Hour)

	if after := e.auditCount(); after != before+1 { // bob's join
		t.Errorf("refused sign-ins wrote %d audit rows", after-before-1)
	}
	for _, email := range []string{"boss@acme.test", "mallory@evil.test", "carol@acme.test", "carol@evil.test"} {
		if _, err := e.st.FindMember(t.Context(), 1, email); err == nil {
			t.Errorf("refused %s became a member", email)
		}
	}
}

// TestOIDCSignInReturnsToThePageAskedFor: a signed-out visit to a console page
// leads to sign-in, and signing in with the team's provider lands on that page,
// as a password sign-in does; a next outside the console is dropped.
func TestOIDCSignInReturnsToThePageAskedFor(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	e, _ := oidcEnv(t, p, nil)
	p.user("ada@acme.test", true)
	signIn := e.client()
	page := signIn.get("/console/signin?next=" + url.QueryEscape("/console/usage"))
	start, ok := page.doc.Find(`[data-testid="sso-button"]`).Attr("href")
	if !ok || start != "/console/signin/acme/oidc?next="+url.QueryEscape("/console/usage") {
		t.Fatalf("the button goes to %q, want it to carry next", start)
	}
	wantRedirect(t, "sign in by OIDC from the usage page", signIn.ssoSignIn(start, nil), "/console/usage")

	p.user("bo@acme.test", true)
	elsewhere := e.client()
	wantRedirect(t, "sign in by OIDC with next elsewhere", elsewhere.ssoSignIn("/console/signin/acme/oidc?next=//evil.test/", nil), "/console/")
}

// TestOIDCNeverCreatesOwnersOrLetsCutOffMembersIn: under the invited policy an
// owner's invite is refused (owners join through their link), a member's
// invite joins as a member, and a cut-off member is refused.
func TestOIDCNeverCreatesOwnersOrLetsCutOffMembersIn(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	e, owner := oidcEnv(t, p, url.Values{"join_policy": {"invited"}, "allowed_domains": {""}})
	start := "/console/signin/acme/oidc"
	ctx := t.Context()
	for email, role := range map[string]string{"boss@acme.test": store.RoleOwner, "dev@acme.test": store.RoleMember} {
		wantStatus(t, "invite "+email, owner.htmx("/console/members/invite", url.Values{"email": {email}, "role": {role}}), http.StatusOK)
	}

	p.user("boss@acme.test", true)
	wantRefused(t, "owner invite by OIDC", e.client().ssoSignIn(start, nil), http.StatusForbidden, "owners join through their invite link")
	if _, err := e.st.FindMember(ctx, 1, "boss@acme.test"); err == nil {
		t.Error("an OIDC sign-in created the invited owner")
	}
	p.user("stranger@acme.test", true)
	wantRefused(t, "uninvited", e.client().ssoSignIn(start, nil), http.StatusForbidden, "has no pending invite")
	p.user("dev@acme.test", true)
	wantRedirect(t, "invited member by OIDC", e.client().ssoSignIn(start, nil), "/console/")
	dev, err := e.st.FindMember(ctx, 1, "dev@acme.test")
	if err != nil || dev.Role != store.RoleMember {
		t.Fatalf("invited member: %+v, %v", dev, err)
	}

	if _, err := e.st.SetMemberStatus(ctx, store.ActorCLI, dev.TeamID, dev.ID, store.StatusDisabled); err != nil {
		t.Fatal(err)
	}
	p.user("dev@acme.test", true)
	wantRefused(t, "cut-off member", e.client().ssoSignIn(start, nil), http.StatusForbidden, "is cut off from team acme")
}

// TestSSOFailuresAreThrottled: refused callbacks count against the address
// like wrong passwords; past the limit even the start of a flow is refused.
func TestSSOFailuresAreThrottled(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	e, _ := oidcEnv(t, p, nil, func(o *console.Options) { o.SignInLimit.PerAddress = 2 })
	start := "/console/signin/acme/oidc"
	for range 2 {
		p.user("mallory@evil.test", true)
		wantRefused(t, "disallowed domain", e.client().ssoSignIn(start, nil), http.StatusForbidden, "does not admit")
	}
	r := e.client().get(start)
	wantRefused(t, "third attempt", r, http.StatusTooManyRequests, "Too many failed sign-ins")
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a throttled sign-in")
	}
	if !strings.Contains(e.logs.String(), "console_sso") {
		t.Error("refused SSO sign-ins left no security event in the log")
	}
}

// TestSSOMisconfigurationIsAClearMessage: an unreachable issuer or a wrong
// secret is named on the settings page when saved and on the sign-in page
// when used (502, never 500), and the secret is shown nowhere, although the
// provider echoes it in its error.
func TestSSOMisconfigurationIsAClearMessage(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	const wrongSecret = "wrong-secret-PLANTED-5c1d"
	e := newEnv(t, withSecrets(map[string]string{oidcSecretEnv: wrongSecret}))
	owner, _ := e.owner("acme", "owner@acme.test")
	form := url.Values{"display_name": {"Acme ID"}, "issuer_url": {p.Issuer()}, "client_id": {p.ClientID},
		"join_policy": {"domains"}, "allowed_domains": {"acme.test"}, "enabled": {"on"}}
	var pages strings.Builder
	check := func(what string, r response, status int, message string) {
		t.Helper()
		pages.WriteString(r.body)
		if r.status != status || !strings.Contains(r.text("sso-check")+r.text("form-error"), message) {
			t.Errorf("%s: %d %q %q, want %d saying %q", what, r.status, r.text("sso-check"), r.text("form-error"), status, message)
		}
	}
	check("save with a wrong secret", owner.post("/console/team/sign-in/sso/oidc", form), http.StatusOK,
		"the provider refused the client id or secret (invalid_client)")
	p.user("ada@acme.test", true)
	check("sign in with a wrong secret", e.client().ssoSignIn("/console/signin/acme/oidc", nil), http.StatusBadGateway,
		"Sign-in with Acme ID is not working: the provider refused the client id or secret")

	form.Set("issuer_url", "http://127.0.0.1:1/oidc")
	check("save with an unreachable issuer", owner.post("/console/team/sign-in/sso/oidc", form), http.StatusOK,
		"the issuer http://127.0.0.1:1/oidc does not serve a usable OpenID configuration")
	check("sign in with an unreachable issuer", e.client().get("/console/signin/acme/oidc"), http.StatusBadGateway,
		"is not working: the issuer http://127.0.0.1:1/oidc does not serve")

	form.Set("issuer_url", "not a url")
	check("save a bad issuer", owner.post("/console/team/sign-in/sso/oidc", form), http.StatusUnprocessableEntity, "issuer must be an https URL")
	if strings.Contains(pages.String(), wrongSecret) || strings.Contains(e.logs.String(), wrongSecret) {
		t.Error("the client secret appears in a page or the log")
	}
}

// TestPasswordSignInOffNeverLocksOut: turning password sign-in off is refused
// without an enabled method, or while the method does not work; once off, a
// right password is told to use SSO, and the last method cannot be disabled.
func TestPasswordSignInOffNeverLocksOut(t *testing.T) {
	t.Parallel()
	p := startProvider(t)
	var secretSet atomic.Bool
	e := newEnv(t, func(o *console.Options) {
		o.Getenv = func(name string) string {
			if name == oidcSecretEnv && secretSet.Load() {
				return p.ClientSecret
			}
			return ""
		}
	})
	owner, _ := e.owner("acme", "owner@acme.test")
	off := url.Values{"password_sign_in": {"off"}}
	r := owner.post("/console/team/sign-in/password", off)
	if r.status != http.StatusConflict || !strings.Contains(r.text("form-error"), "enable a single sign-on method first") {
		t.Fatalf("off without SSO: %d %q", r.status, r.text("form-error"))
	}
	form := url.Values{"display_name": {"Acme ID"}, "issuer_url": {p.Issuer()}, "client_id": {p.ClientID},
		"join_policy": {"invited"}, "enabled": {"on"}}
	wantStatus(t, "save OIDC without its secret", owner.post("/console/team/sign-in/sso/oidc", form), http.StatusOK)
	r = owner.post("/console/team/sign-in/password", off)
	if r.status != http.StatusConflict || !strings.Contains(r.text("form-error"), oidcSecretEnv+" is not set") {
		t.Fatalf("off with a method that has no secret: %d %q", r.status, r.text("form-error"))
	}
	secretSet.Store(true)
	wantRedirect(t, "off with a working method", owner.post("/console/team/sign-in/password", off), "/console/team/sign-in")

	signIn := e.client().post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {password}})
	if signIn.status != http.StatusForbidden || !strings.Contains(signIn.text("form-error"), "single sign-on only") {
		t.Errorf("password sign-in while off: %d %q", signIn.status, signIn.text("form-error"))
	}
	form.Del("enabled")
	r = owner.post("/console/team/sign-in/sso/oidc", form)
	if r.status != http.StatusConflict || !strings.Contains(r.text("form-error"), "last single sign-on method cannot be disabled") {
		t.Errorf("disable the last method while password sign-in is off: %d %q", r.status, r.text("form-error"))
	}
	p.user("owner@acme.test", true)
	wantRedirect(t, "owner signs in by OIDC", e.client().ssoSignIn("/console/signin/acme/oidc", nil), "/console/")
	wantRedirect(t, "password back on", owner.post("/console/team/sign-in/password", url.Values{"password_sign_in": {"on"}}), "/console/team/sign-in")
}

// TestBrowserOIDCJourney clicks through single sign-on in headless Chromium:
// the owner sets up the team, turns on "Sign in with Acme ID" for the acme.test
// domain on the sign-in settings page, which checks it against the local
// OpenID provider; a new person clicks the button in their own browser and
// lands in the console as a member; the owner's members page says they use OIDC.
func TestBrowserOIDCJourney(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no %s; install Debian's chromium package to run the browser journey", chromium)
		}
		t.Fatalf("%s is missing on CI: %v", chromium, err)
	}
	p := startProvider(t)
	j := startJourney(t, withSecrets(map[string]string{oidcSecretEnv: p.ClientSecret}))
	token, _, err := j.st.CreateSetupLink(t.Context(), store.ActorCLI)
	if err != nil {
		t.Fatal(err)
	}
	owner := j.tab(t)
	j.do(t, owner, "create the team",
		chromedp.Navigate(console.SetupURL(j.url, token)),
		chromedp.SendKeys(chromedp.ID("team"), "acme"),
		chromedp.SendKeys(chromedp.ID("email"), "owner@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="keys"]`)))
	j.do(t, owner, "turn on OIDC sign-in",
		chromedp.Navigate(j.url+"/console/members"),
		chromedp.Click(chromedp.CSS(`[data-testid="sign-in-settings"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-form-oidc"]`)),
		chromedp.SendKeys(chromedp.ID("oidc-name"), "Acme ID"),
		chromedp.SendKeys(chromedp.ID("oidc-issuer"), p.Issuer()),
		chromedp.SendKeys(chromedp.ID("oidc-client"), p.ClientID),
		chromedp.Click(chromedp.CSS(`[data-testid="sso-form-oidc"] input[value="domains"]`)),
		chromedp.SendKeys(chromedp.ID("oidc-domains"), "acme.test"),
		chromedp.Click(chromedp.CSS(`[data-testid="sso-form-oidc"] input[name="enabled"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="sso-form-oidc"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-saved"]`)))
	if check := j.text(t, owner, `[data-testid="sso-oidc"] [data-testid="sso-check"]`); !strings.HasPrefix(check, "Checked") {
		t.Fatalf("settings check: %q", check)
	}
	j.shot(t, owner, "sso-01-settings")

	p.user("grace@acme.test", true)
	grace := j.tab(t)
	j.do(t, grace, "open the sign-in page",
		chromedp.Navigate(j.url+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sso-button"]`)))
	if label := j.text(t, grace, `[data-testid="sso-button"]`); label != "Sign in with Acme ID (acme)" {
		t.Errorf("sign-in button: %q", label)
	}
	j.shot(t, grace, "sso-02-signin")
	j.do(t, grace, "sign in with Acme ID",
		chromedp.Click(chromedp.CSS(`[data-testid="sso-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="keys"]`)))
	if html := j.html(t, grace); !strings.Contains(html, "grace@acme.test") {
		t.Errorf("grace's home does not name her:\n%.800s", html)
	}
	j.shot(t, grace, "sso-03-member-home")
	m, err := j.st.FindMember(t.Context(), 1, "grace@acme.test")
	if err != nil || m.Role != store.RoleMember {
		t.Fatalf("grace: %+v, %v; want a member", m, err)
	}
	j.do(t, owner, "open the members page", chromedp.Navigate(j.url+"/console/members"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="members"]`)))
	if got := j.text(t, owner, `tbody tr:nth-child(2) [data-testid="member-sign-in"]`); got != "OIDC" {
		t.Errorf("members page shows grace's sign-in as %q, want OIDC", got)
	}
}
