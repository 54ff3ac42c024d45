package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// One-time links and one-time secrets, through real replicas (HOSTILE 54, 56, 57).

const ownerPassword = "correct horse battery"

// browser is one person's browser: its cookies (shared by every replica on
// 127.0.0.1, as a browser shares them behind one load balancer), redirects
// not followed.
type browser struct {
	t  *testing.T
	hc *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer with its HTML parsed.
type page struct {
	response
	doc *goquery.Document
}

func (p page) text(testid string) string {
	return strings.TrimSpace(p.doc.Find(`[data-testid="` + testid + `"]`).Text())
}

func (b *browser) do(method, u string, form url.Values, header map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	must(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	must(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(b.t, err)
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(raw))
	must(b.t, err)
	return page{response{status: resp.StatusCode, header: resp.Header, body: string(raw)}, doc}
}

func (b *browser) get(u string) page { b.t.Helper(); return b.do(http.MethodGet, u, nil, nil) }

func (b *browser) post(u string, form url.Values) page {
	b.t.Helper()
	return b.do(http.MethodPost, u, form, nil)
}

func wantPage(t *testing.T, what string, p page, status int) {
	t.Helper()
	if p.status != status {
		t.Fatalf("%s: %d, want %d\n%.800s", what, p.status, status, p.body)
	}
}

func setupForm(team string) url.Values {
	return url.Values{"team": {team}, "email": {"owner@" + team + ".test"}, "password": {ownerPassword}}
}

// teamCount is how many teams the deployment has.
func teamCount(t *testing.T, st *store.Store) int {
	t.Helper()
	teams, err := st.Teams(context.Background())
	must(t, err)
	return len(teams)
}

// TestSetupLinksMakeOneOwner: two replicas each print a setup link at start;
// four people race both links on both replicas. Exactly one team and owner
// come out; every other attempt is told the gateway has an owner.
func TestSetupLinksMakeOneOwner(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.Schema(t)
	st := store.New(dbtest.Pool(t, dbURL))
	replicas := []*apptest.Replica{apptest.Start(t, dbURL, nil), apptest.Start(t, dbURL, nil)}
	var links []string
	for range replicas {
		token, _, err := st.CreateSetupLink(t.Context(), store.ActorCLI)
		must(t, err)
		links = append(links, token)
	}

	start := make(chan struct{})
	pages := make([]page, 4)
	var wg sync.WaitGroup
	for i := range pages {
		wg.Go(func() {
			<-start
			u := replicas[i%2].URL + "/console/setup/" + links[i/2]
			pages[i] = newBrowser(t).post(u, setupForm(fmt.Sprintf("team%d", i)))
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, p := range pages {
		switch {
		case p.status == http.StatusSeeOther:
			won++
		case p.status != http.StatusGone || p.text("setup-done") == "":
			t.Errorf("attempt %d: %d, want 303 for the winner and 410 saying setup is done for the rest\n%.600s", i, p.status, p.body)
		}
	}
	if n := teamCount(t, st); won != 1 || n != 1 {
		t.Fatalf("%d setups won and %d teams exist, want exactly one", won, n)
	}
}

// TestLateSetupLinkIsRefused: a link printed at start, used after an owner
// exists (as by someone who read an old start log), is refused with a clear
// page on GET and POST and creates nothing; no new link can be made.
func TestLateSetupLinkIsRefused(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.Schema(t)
	st := store.New(dbtest.Pool(t, dbURL))
	gw := apptest.Start(t, dbURL, nil)
	printed, _, err := st.CreateSetupLink(t.Context(), store.ActorCLI)
	must(t, err)
	first, _, err := st.CreateSetupLink(t.Context(), store.ActorCLI)
	must(t, err)
	wantPage(t, "the owner's setup", newBrowser(t).post(gw.URL+"/console/setup/"+first, setupForm("acme")), http.StatusSeeOther)

	late := newBrowser(t)
	for what, p := range map[string]page{
		"open":   late.get(gw.URL + "/console/setup/" + printed),
		"submit": late.post(gw.URL+"/console/setup/"+printed, setupForm("late")),
	} {
		if p.status != http.StatusGone || !strings.Contains(p.text("setup-done"), "already has an owner") || p.doc.Find("form").Length() != 0 {
			t.Errorf("%s the late setup link: %d, want 410 saying the gateway has an owner, with no form\n%.600s", what, p.status, p.body)
		}
	}
	if n := teamCount(t, st); n != 1 {
		t.Errorf("%d teams after the late link, want 1", n)
	}
	if _, _, err := st.CreateSetupLink(t.Context(), store.ActorCLI); !errors.Is(err, store.ErrSetupDone) {
		t.Errorf("a new setup link after the owner: %v, want ErrSetupDone", err)
	}
}

// TestInviteToSSOOnlyTeamGoesThroughItsProvider: with password sign-in off,
// an invite's page offers only the team's provider, a password posted anyway
// is refused and uses nothing, another identity at the provider is refused,
// and the invited identity completes it, as the invite's role.
func TestInviteToSSOOnlyTeamGoesThroughItsProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	st := store.New(dbtest.Pool(t, dbURL)).WithOutbound(apptest.Outbound())
	provider, err := mockoidc.Run()
	must(t, err)
	t.Cleanup(func() { provider.Shutdown() })
	link, _, err := st.CreateSetupLink(ctx, store.ActorCLI)
	must(t, err)
	_, err = st.CompleteSetup(ctx, link, "acme", "owner@acme.test", ownerPassword)
	must(t, err)
	team, err := st.FindTeam(ctx, "acme")
	must(t, err)
	_, err = st.SetSSOMethod(ctx, store.ActorCLI, store.SSOMethod{TeamID: team.ID, Kind: store.SignInOIDC, DisplayName: "Acme ID",
		IssuerURL: provider.Issuer(), ClientID: provider.ClientID, JoinPolicy: store.JoinInvited, Enabled: true})
	must(t, err)
	_, err = st.SetPasswordSignIn(ctx, store.ActorCLI, team.ID, false)
	must(t, err)
	token, _, err := st.CreateInvite(ctx, store.ActorCLI, team.ID, "boss@acme.test", store.RoleOwner)
	must(t, err)
	gw := apptest.Start(t, dbURL, map[string]string{store.SSOSecretEnv("acme", store.SignInOIDC): provider.ClientSecret})
	invite := gw.URL + "/console/invite/" + token

	b := newBrowser(t)
	p := b.get(invite)
	wantPage(t, "open the invite", p, http.StatusOK)
	start, _ := p.doc.Find(`[data-testid="sso-button"]`).Attr("href")
	if start != "/console/invite/"+token+"/signin/oidc" || p.doc.Find(`input[type="password"]`).Length() != 0 {
		t.Fatalf("invite page: button to %q, %d password fields; want only the provider\n%.800s",
			start, p.doc.Find(`input[type="password"]`).Length(), p.body)
	}
	p = b.post(invite, url.Values{"password": {ownerPassword}})
	if p.status != http.StatusForbidden || !strings.Contains(p.text("form-error"), "identity provider only") || b.signedIn(gw) {
		t.Fatalf("invite accepted with a password: %d %q, want 403 and no session\n%.800s", p.status, p.text("form-error"), p.body)
	}
	if _, err := st.FindMember(ctx, team.ID, "boss@acme.test"); err == nil {
		t.Fatal("the refused password made a member")
	}

	// viaProvider clicks the invite's button and comes back from the provider
	// signed in there as email.
	viaProvider := func(b *browser, email string) page {
		t.Helper()
		provider.QueueUser(&mockoidc.MockUser{Subject: email, Email: email, EmailVerified: true})
		p := b.get(gw.URL + start)
		wantPage(t, "start at the provider", p, http.StatusSeeOther)
		back, err := b.hc.Get(p.header.Get("Location"))
		must(t, err)
		back.Body.Close()
		callback, err := url.Parse(back.Header.Get("Location"))
		must(t, err)
		return b.get(gw.URL + callback.RequestURI())
	}
	mallory := newBrowser(t)
	if p := viaProvider(mallory, "mallory@acme.test"); p.status != http.StatusForbidden || !strings.Contains(p.text("form-error"), "this invite is for boss@acme.test") {
		t.Fatalf("another identity completing the invite: %d %q, want 403\n%.800s", p.status, p.text("form-error"), p.body)
	}
	if _, err := st.PendingInvite(ctx, token); err != nil {
		t.Fatalf("the refused identity used the invite up: %v", err)
	}

	if p := viaProvider(b, "boss@acme.test"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/" {
		t.Fatalf("the invited identity: %d to %q, want 303 to /console/\n%.800s", p.status, p.header.Get("Location"), p.body)
	}
	boss, err := st.FindMember(ctx, team.ID, "boss@acme.test")
	if err != nil || boss.Role != store.RoleOwner || boss.SignInMethod != store.SignInOIDC || !b.signedIn(gw) {
		t.Fatalf("after the provider: %+v, %v, signed in %v; want an owner who signed in by OIDC", boss, err, b.signedIn(gw))
	}
	if _, err := st.PendingInvite(ctx, token); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the completed invite is still pending: %v", err)
	}
}

// signedIn reports whether the browser has a console session on gw.
func (b *browser) signedIn(gw *apptest.Replica) bool {
	b.t.Helper()
	return b.get(gw.URL+"/console/").status == http.StatusOK
}

// TestOneTimeSecretsAreNotStoredReadable: a key, an admin token and an invite
// made on replica A with a plain form post are shown once on replica B after
// the redirect, and while they wait for that page the sessions table holds
// no byte of them.
func TestOneTimeSecretsAreNotStoredReadable(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.Schema(t)
	pool := dbtest.Pool(t, dbURL)
	st := store.New(pool)
	a, b := apptest.Start(t, dbURL, nil), apptest.Start(t, dbURL, nil)
	link, _, err := st.CreateSetupLink(t.Context(), store.ActorCLI)
	must(t, err)
	owner := newBrowser(t)
	wantPage(t, "setup", owner.post(a.URL+"/console/setup/"+link, setupForm("acme")), http.StatusSeeOther)

	sessions := func() []byte {
		var all []byte
		rows, err := pool.Query(t.Context(), "SELECT data FROM sessions")
		must(t, err)
		defer rows.Close()
		for rows.Next() {
			var data []byte
			must(t, rows.Scan(&data))
			all = append(all, data...)
		}
		must(t, rows.Err())
		return all
	}
	for _, c := range []struct {
		what, post, page, testid string
		form                     url.Values
		secret                   func(shown string) string // the part of what is shown that is secret
	}{
		{"key", "/console/keys", "/console/", "new-key-value", url.Values{"name": {"laptop"}},
			func(k string) string { return k[strings.LastIndex(k, "_")+1:] }},
		{"admin token", "/console/team/tokens", "/console/team/tokens", "admin-token-secret",
			url.Values{"name": {"ci"}, "role": {"owner"}, "expires_days": {"30"}}, func(s string) string { return s[strings.LastIndex(s, "_")+1:] }},
		{"invite", "/console/members/invite", "/console/members", "invite-link", url.Values{"email": {"ada@acme.test"}, "role": {"member"}},
			func(l string) string { return l[strings.LastIndex(l, "/")+1:] }},
	} {
		p := owner.post(a.URL+c.post, c.form)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), c.page) {
			t.Fatalf("%s: %d to %q, want 303 to %s\n%.600s", c.what, p.status, p.header.Get("Location"), c.page, p.body)
		}
		atRest := sessions()
		shown := owner.get(b.URL + c.page)
		wantPage(t, c.what+" page on replica B", shown, http.StatusOK)
		secret := c.secret(shown.text(c.testid))
		if len(secret) < 20 {
			t.Fatalf("%s: replica B shows %q after the redirect, want the new secret\n%.600s", c.what, shown.text(c.testid), shown.body)
		}
		if bytes.Contains(atRest, []byte(secret)) {
			t.Errorf("%s: sessions.data holds its secret in plain text while the redirect is under way", c.what)
		}
		if shown.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s page: Cache-Control %q, want no-store", c.what, shown.header.Get("Cache-Control"))
		}
		if again := owner.get(b.URL + c.page); strings.Contains(again.body, secret) {
			t.Errorf("%s: shown a second time", c.what)
		}
		if bytes.Contains(sessions(), []byte(secret)) {
			t.Errorf("%s: sessions.data holds its secret after it was shown", c.what)
		}
	}
}

// TestSecretAnswersAreNoStore lists every answer that carries a one-time
// secret, on the admin API and in the console, and wants Cache-Control:
// no-store on each.
func TestSecretAnswersAreNoStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	st := store.New(dbtest.Pool(t, dbURL))
	gw := apptest.Start(t, dbURL, nil)
	setup, _, err := st.CreateSetupLink(ctx, store.ActorCLI)
	must(t, err)
	setupPage := newBrowser(t).get(gw.URL + "/console/setup/" + setup)
	owner := newBrowser(t)
	wantPage(t, "setup", owner.post(gw.URL+"/console/setup/"+setup, setupForm("acme")), http.StatusSeeOther)
	team, err := st.FindTeam(ctx, "acme")
	must(t, err)
	ada, err := st.AddMember(ctx, store.ActorCLI, team.ID, "ada@acme.test", store.RoleMember)
	must(t, err)
	key, err := st.IssueKey(ctx, store.ActorCLI, team.ID, ada.ID, "laptop")
	must(t, err)
	token, err := st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{TeamID: &team.ID, Name: "ci", Role: store.TokenRoleOwner, Lifetime: 24 * time.Hour})
	must(t, err)
	inviteToken, _, err := st.CreateInvite(ctx, store.ActorCLI, team.ID, "bo@acme.test", store.RoleMember)
	must(t, err)

	htmx := map[string]string{"HX-Request": "true"}
	answers := []struct {
		what string
		p    page
	}{
		{"API issueKey", apiPost(t, gw.URL+fmt.Sprintf("/api/v1/members/%d/keys", ada.ID), token.Plaintext, `{"name":"ci"}`)},
		{"API rotateKey", apiPost(t, gw.URL+"/api/v1/keys/"+key.ID+"/rotate", token.Plaintext, `{}`)},
		{"API inviteMember", apiPost(t, gw.URL+"/api/v1/invites", token.Plaintext, `{"email":"cy@acme.test","role":"member"}`)},
		{"console setup page", setupPage},
		{"console invite page", newBrowser(t).get(gw.URL + "/console/invite/" + inviteToken)},
		{"console new key (HTMX)", owner.do(http.MethodPost, gw.URL+"/console/keys", url.Values{"name": {"a"}}, htmx)},
		{"console new key (page)", owner.post(gw.URL+"/console/keys", url.Values{"name": {"b"}})},
		{"console home with the new key", owner.get(gw.URL + "/console/")},
		{"console new admin token (HTMX)", owner.do(http.MethodPost, gw.URL+"/console/team/tokens",
			url.Values{"name": {"a"}, "role": {"read"}, "expires_days": {"1"}}, htmx)},
		{"console new admin token (page)", owner.post(gw.URL+"/console/team/tokens", url.Values{"name": {"b"}, "role": {"read"}, "expires_days": {"1"}})},
		{"console tokens page with the new token", owner.get(gw.URL + "/console/team/tokens")},
		{"console invite (HTMX)", owner.do(http.MethodPost, gw.URL+"/console/members/invite", url.Values{"email": {"di@acme.test"}, "role": {"member"}}, htmx)},
		{"console reissued invite", owner.post(gw.URL+"/console/members/invites/reissue", url.Values{"email": {"di@acme.test"}})},
		{"console members page with the invite", owner.get(gw.URL + "/console/members")},
	}
	for _, a := range answers {
		if a.p.status >= 400 {
			t.Errorf("%s: %d\n%.400s", a.what, a.p.status, a.p.body)
		}
		if cc := a.p.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", a.what, cc)
		}
	}
}

// apiPost calls the admin API with an owner token.
func apiPost(t *testing.T, u, token, body string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	r := do(t, req)
	return page{response: r, doc: &goquery.Document{}}
}
