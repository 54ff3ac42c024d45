package console_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

const (
	password = "correct horse battery"
	// providerSecret is planted in the console's environment; no page may show it.
	providerSecret = "sk-ant-PLANTED-console-credential-51e0"
)

// env is a console on its own schema behind a test server.
type env struct {
	t       *testing.T
	st      *store.Store
	pool    *pgxpool.Pool
	srv     *httptest.Server
	console *console.Console
	router  chi.Router
	logs    *apptest.SyncBuffer
}

type option func(*console.Options)

// newEnv serves a console over plain http; newTLSEnv over TLS, with an https
// public URL.
func newEnv(t *testing.T, opts ...option) *env { return startEnv(t, false, opts...) }

func newTLSEnv(t *testing.T, opts ...option) *env { return startEnv(t, true, opts...) }

func startEnv(t *testing.T, tls bool, opts ...option) *env {
	t.Helper()
	e := &env{t: t, pool: dbtest.Pool(t, dbtest.Schema(t)), logs: &apptest.SyncBuffer{}}
	guard := apptest.Outbound()
	e.st = store.New(e.pool).WithOutbound(guard).WithGrants(apptest.Grants(map[string]string{"TOLLGATE_CREDENTIAL_EU": "", "TOLLGATE_CREDENTIAL_SECOND": ""}))
	e.srv = httptest.NewUnstartedServer(nil)
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	o := console.Options{
		Store: e.st, Pool: e.pool, PublicURL: scheme + e.srv.Listener.Addr().String(),
		Getenv: func(name string) string {
			if name == "ANTHROPIC_API_KEY" {
				return providerSecret
			}
			return ""
		},
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.SSO.Outbound == nil {
		o.SSO.Outbound = guard
	}
	e.console = console.New(o)
	e.router = chi.NewRouter()
	e.console.Mount(e.router)
	e.srv.Config.Handler = e.router
	if tls {
		e.srv.StartTLS()
	} else {
		e.srv.Start()
	}
	t.Cleanup(e.srv.Close)
	return e
}

// client is one browser: its own cookies, redirects not followed.
type client struct {
	t    *testing.T
	e    *env
	http *http.Client
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	hc := *e.srv.Client() // a copy: the server's client is shared
	hc.Jar = jar
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client{t: e.t, e: e, http: &hc}
}

type response struct {
	status int
	header http.Header
	body   string
	doc    *goquery.Document
}

// text is the trimmed text of the elements with data-testid id.
func (r response) text(id string) string {
	return strings.TrimSpace(r.doc.Find(`[data-testid="` + id + `"]`).Text())
}

func (r response) has(id string) bool { return r.doc.Find(`[data-testid="`+id+`"]`).Length() > 0 }

func (c *client) do(method, path string, form url.Values, header map[string]string) response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.e.srv.URL+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b), doc: doc}
}

func (c *client) get(path string) response { c.t.Helper(); return c.do("GET", path, nil, nil) }

func (c *client) post(path string, form url.Values) response {
	c.t.Helper()
	return c.do("POST", path, form, nil)
}

// htmx posts as HTMX does.
func (c *client) htmx(path string, form url.Values) response {
	c.t.Helper()
	return c.do("POST", path, form, map[string]string{"HX-Request": "true"})
}

// cookie is the session cookie's value in the jar, or "".
func (c *client) cookie() string {
	u, _ := url.Parse(c.e.srv.URL)
	for _, ck := range c.http.Jar.Cookies(u) {
		if strings.HasSuffix(ck.Name, "tollgate") {
			return ck.Value
		}
	}
	return ""
}

func wantStatus(t *testing.T, what string, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d\n%.600s", what, r.status, status, r.body)
	}
}

func wantRedirect(t *testing.T, what string, r response, location string) {
	t.Helper()
	if r.status != http.StatusSeeOther || r.header.Get("Location") != location {
		t.Fatalf("%s: %d to %q, want 303 to %q\n%.600s", what, r.status, r.header.Get("Location"), location, r.body)
	}
}

// owner is ownerWithDefaults, the team then choosing no tiers and no team
// budget: each test sets the limits it is about.
func (e *env) owner(team, email string) (*client, store.Member) {
	e.t.Helper()
	c, m := e.ownerWithDefaults(team, email)
	if err := e.st.SetDefaultTier(e.t.Context(), store.ActorCLI, m.TeamID, store.TierNone); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.SetTeamLimits(e.t.Context(), store.ActorCLI, m.TeamID, store.NoLimits()); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.AssignTier(e.t.Context(), store.ActorCLI, m.TeamID, m.ID, ""); err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.DeleteTier(e.t.Context(), store.ActorCLI, m.TeamID, store.DefaultTierName); err != nil {
		e.t.Fatal(err)
	}
	return c, m
}

// ownerWithDefaults runs the first-run setup link and returns the signed-in
// owner, their team as new teams are made. A further team is made as the
// operator makes it (setup links work only for the first): created, its owner
// invited and joining through the link.
func (e *env) ownerWithDefaults(team, email string) (*client, store.Member) {
	e.t.Helper()
	ctx := e.t.Context()
	c := e.client()
	token, _, err := e.st.CreateSetupLink(ctx, store.ActorCLI)
	switch {
	case errors.Is(err, store.ErrSetupDone):
		t, err := e.st.CreateTeam(ctx, store.ActorCLI, team)
		if err != nil {
			e.t.Fatal(err)
		}
		if token, _, err = e.st.CreateInvite(ctx, store.ActorCLI, t.ID, email, store.RoleOwner); err != nil {
			e.t.Fatal(err)
		}
		wantRedirect(e.t, "accept the owner's invite", c.post("/console/invite/"+token, url.Values{"password": {password}}), "/console/")
	case err != nil:
		e.t.Fatal(err)
	default:
		r := c.post("/console/setup/"+token, url.Values{"team": {team}, "email": {email}, "password": {password}})
		wantRedirect(e.t, "setup", r, "/console/")
	}
	m, err := e.st.SignIn(e.t.Context(), email, password)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, m
}

// invite has owner invite email and returns the new member, signed in.
func (e *env) invite(owner *client, email string) (*client, store.Member) {
	e.t.Helper()
	r := owner.htmx("/console/members/invite", url.Values{"email": {email}, "role": {"member"}})
	wantStatus(e.t, "invite", r, http.StatusOK)
	link := r.text("invite-link")
	if !strings.HasPrefix(link, e.srv.URL+"/console/invite/") {
		e.t.Fatalf("invite link %q", link)
	}
	c := e.client()
	wantRedirect(e.t, "accept invite", c.post(strings.TrimPrefix(link, e.srv.URL), url.Values{"password": {password}}), "/console/")
	m, err := e.st.SignIn(e.t.Context(), email, password)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, m
}

// signIn signs email in with the password every test member has, on a new browser.
func (e *env) signIn(email string) *client {
	e.t.Helper()
	c := e.client()
	wantRedirect(e.t, "sign in "+email, c.post("/console/signin", url.Values{"email": {email}, "password": {password}}), "/console/")
	return c
}

// auditCount is how many audit rows exist, to prove a refused request wrote nothing.
func (e *env) auditCount() int {
	e.t.Helper()
	entries, err := e.st.Audit(e.t.Context(), nil, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(entries)
}
