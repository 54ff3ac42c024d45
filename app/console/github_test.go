package console_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/sso"
	"github.com/tollgate/tollgate/app/store"
)

const (
	githubClientID     = "Iv1.tollgate-test"
	githubClientSecret = "github-secret-PLANTED-7a2e"
	githubSecretEnv    = "TOLLGATE_SSO_ACME_GITHUB_SECRET"
)

// githubUser is who signs in at the fake GitHub next.
type githubUser struct {
	login    string
	email    string
	verified bool
	orgs     []string // active memberships
}

// fakeGitHub answers GitHub's OAuth app flow and the three API calls the
// gateway makes, as github.com does: errors of the token endpoint come as 200
// with an "error" field, a non-member's membership is 404, PKCE is checked.
type fakeGitHub struct {
	*httptest.Server
	mu    sync.Mutex
	next  githubUser
	codes map[string]struct {
		user      githubUser
		challenge string
	}
	tokens map[string]githubUser
}

func startGitHub(t *testing.T) *fakeGitHub {
	g := &fakeGitHub{codes: map[string]struct {
		user      githubUser
		challenge string
	}{}, tokens: map[string]githubUser{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != githubClientID || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad authorize request", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		code := "code-" + q.Get("state")[:8]
		g.codes[code] = struct {
			user      githubUser
			challenge string
		}{g.next, q.Get("code_challenge")}
		g.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if id != githubClientID || secret != githubClientSecret {
			json.NewEncoder(w).Encode(map[string]string{"error": "incorrect_client_credentials",
				"error_description": "The client_id and/or client_secret passed are incorrect: " + secret})
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		grant, ok := g.codes[r.PostForm.Get("code")]
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != grant.challenge {
			json.NewEncoder(w).Encode(map[string]string{"error": "bad_verification_code"})
			return
		}
		delete(g.codes, r.PostForm.Get("code"))
		token := "gho_" + grant.user.login
		g.tokens[token] = grant.user
		json.NewEncoder(w).Encode(map[string]string{"access_token": token, "token_type": "bearer", "scope": "read:user,user:email,read:org"})
	})
	user := func(r *http.Request) (githubUser, bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		u, ok := g.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		return u, ok
	}
	mux.HandleFunc("GET /api/user", func(w http.ResponseWriter, r *http.Request) {
		if u, ok := user(r); ok {
			json.NewEncoder(w).Encode(map[string]any{"id": 42, "login": u.login})
			return
		}
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /api/user/emails", func(w http.ResponseWriter, r *http.Request) {
		if u, ok := user(r); ok {
			json.NewEncoder(w).Encode([]map[string]any{
				{"email": u.login + "@users.noreply.github.com", "primary": false, "verified": true},
				{"email": u.email, "primary": true, "verified": u.verified}})
			return
		}
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /api/user/memberships/orgs/{org}", func(w http.ResponseWriter, r *http.Request) {
		u, ok := user(r)
		if ok && strings.Contains(","+strings.Join(u.orgs, ",")+",", ","+r.PathValue("org")+",") {
			json.NewEncoder(w).Encode(map[string]string{"state": "active", "role": "member"})
			return
		}
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	})
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGitHub) signsIn(u githubUser) {
	g.mu.Lock()
	g.next = u
	g.mu.Unlock()
}

// TestGitHubSignIn: members of the allowed organisation join as members;
// people outside it, or without a verified primary email, are refused; a
// wrong client secret is a clear message, without the secret GitHub echoes.
func TestGitHubSignIn(t *testing.T) {
	t.Parallel()
	g := startGitHub(t)
	var secret atomic.Value
	secret.Store(githubClientSecret)
	e := newEnv(t, func(o *console.Options) {
		o.SSO = sso.Options{GitHub: sso.GitHub{WebURL: g.URL, APIURL: g.URL + "/api"}}
		o.Getenv = func(name string) string {
			if name == githubSecretEnv {
				return secret.Load().(string)
			}
			return ""
		}
	})
	owner, _ := e.owner("acme", "owner@acme.test")
	form := url.Values{"display_name": {"GitHub"}, "client_id": {githubClientID}, "join_policy": {"org"},
		"allowed_org": {"acme-corp"}, "enabled": {"on"}}
	r := owner.post("/console/team/sign-in/sso/github", form)
	if r.status != http.StatusOK || !strings.Contains(r.text("sso-check"), "Checked") {
		t.Fatalf("save GitHub settings: %d %q %q", r.status, r.text("sso-check"), r.text("form-error"))
	}
	if got := r.doc.Find(`[data-testid="sso-github"] [data-testid="sso-callback"]`).Text(); got != e.srv.URL+"/console/signin/acme/github/callback" {
		t.Errorf("callback to register: %q", got)
	}
	start := "/console/signin/acme/github"

	g.signsIn(githubUser{login: "octo", email: "octo@elsewhere.test", verified: true, orgs: []string{"acme-corp"}})
	wantRedirect(t, "org member signs in", e.client().ssoSignIn(start, nil), "/console/")
	octo, err := e.st.FindMember(t.Context(), 1, "octo@elsewhere.test")
	if err != nil || octo.Role != store.RoleMember || octo.SignInMethod != store.SignInGitHub {
		t.Fatalf("org member: %+v, %v", octo, err)
	}
	if got := owner.get("/console/members").doc.Find(`[data-testid="member-sign-in"]`).Eq(1).Text(); got != "GitHub" {
		t.Errorf("members page shows %q for the GitHub member", got)
	}

	g.signsIn(githubUser{login: "outsider", email: "outsider@acme.test", verified: true, orgs: []string{"other-corp"}})
	wantRefused(t, "not in the org", e.client().ssoSignIn(start, nil), http.StatusForbidden, "not an active member of the GitHub organisation acme-corp")
	g.signsIn(githubUser{login: "unverified", email: "unverified@acme.test", orgs: []string{"acme-corp"}})
	wantRefused(t, "unverified primary email", e.client().ssoSignIn(start, nil), http.StatusForbidden, "no verified primary email address for unverified")
	// Leaving the organisation ends GitHub sign-in for an existing member too.
	g.signsIn(githubUser{login: "octo", email: "octo@elsewhere.test", verified: true})
	wantRefused(t, "left the org", e.client().ssoSignIn(start, nil), http.StatusForbidden, "not an active member")

	const wrongSecret = "wrong-github-secret-PLANTED-e41b"
	secret.Store(wrongSecret)
	r = owner.post("/console/team/sign-in/sso/github", form)
	if !strings.Contains(r.text("sso-check"), "the provider refused the client id or secret (incorrect_client_credentials)") {
		t.Errorf("save with a wrong secret: %q", r.text("sso-check"))
	}
	g.signsIn(githubUser{login: "octo", email: "octo@elsewhere.test", verified: true, orgs: []string{"acme-corp"}})
	refused := e.client().ssoSignIn(start, nil)
	wantRefused(t, "wrong secret", refused, http.StatusBadGateway, "Sign-in with GitHub is not working")
	if strings.Contains(r.body+refused.body+e.logs.String(), wrongSecret) {
		t.Error("GitHub's echo of the client secret reached a page or the log")
	}
}
