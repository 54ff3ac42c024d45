package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy/apikey"
)

// offboarding is two replicas on one schema, and a team with two owners, Ann
// and Bo, each signed in on their own browser.
type offboarding struct {
	st       *store.Store
	r1, r2   string // the replicas' base URLs
	team     int64
	ann, bo  store.Member
	annC, bC *personBrowser
}

const offboardingPassword = "correct horse battery"

func newOffboarding(t *testing.T) *offboarding {
	t.Helper()
	ctx := t.Context()
	dbURL := dbtest.Schema(t)
	o := &offboarding{st: store.New(dbtest.Pool(t, dbURL))}
	o.r1 = apptest.Start(t, dbURL, nil).URL
	o.r2 = apptest.Start(t, dbURL, nil).URL
	link, _, err := o.st.CreateSetupLink(ctx, store.ActorCLI)
	must(t, err)
	o.ann, err = o.st.CompleteSetup(ctx, link, "acme", "ann@acme.test", offboardingPassword)
	must(t, err)
	o.team = o.ann.TeamID
	invite, _, err := o.st.CreateInvite(ctx, store.MemberActor(o.ann.ID), o.team, "bo@acme.test", store.RoleOwner)
	must(t, err)
	o.bo, err = o.st.AcceptInvite(ctx, invite, offboardingPassword)
	must(t, err)
	o.annC, o.bC = o.signIn(t, o.r1, "ann@acme.test"), o.signIn(t, o.r1, "bo@acme.test")
	return o
}

// personBrowser is one person's cookie jar; redirects are not followed. The jar
// sends its cookies to both replicas (cookies do not care about ports), as a
// load balancer in front of them would.
type personBrowser struct{ c *http.Client }

func (o *offboarding) signIn(t *testing.T, replica, email string) *personBrowser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &personBrowser{c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	status, _ := b.form(t, replica+"/console/signin", url.Values{"email": {email}, "password": {offboardingPassword}}, false)
	if status != http.StatusSeeOther {
		t.Fatalf("sign in %s: %d", email, status)
	}
	return b
}

func (b *personBrowser) send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := b.c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *personBrowser) get(t *testing.T, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return b.send(t, req)
}

func (b *personBrowser) form(t *testing.T, u string, form url.Values, htmx bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if htmx {
		req.Header.Set("HX-Request", "true")
	}
	return b.send(t, req)
}

// signedIn reports whether b's session is alive on replica: the members page
// answers it, instead of sending it to sign in.
func (b *personBrowser) signedIn(t *testing.T, replica string) bool {
	t.Helper()
	status, _ := b.get(t, replica+"/console/members")
	return status == http.StatusOK
}

var tokenPlaintext = regexp.MustCompile(`tga_[A-Za-z0-9_-]+`)

// adminToken makes an owner token through b's console session, as a person does.
func (b *personBrowser) adminToken(t *testing.T, replica string) string {
	t.Helper()
	status, body := b.form(t, replica+"/console/team/tokens", url.Values{"name": {"laptop"}, "role": {"owner"}, "expires_days": {"30"}}, true)
	token := tokenPlaintext.FindString(body)
	if status != http.StatusOK || token == "" {
		t.Fatalf("make a token in the console: %d\n%.400s", status, body)
	}
	return token
}

// api calls the admin API with token; it returns the status and the body.
func api(t *testing.T, method, u, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func memberPath(replica string, id int64) string {
	return replica + "/api/v1/members/" + strconv.FormatInt(id, 10)
}

// TestOffboardingBindsOnEveryReplica: an owner cut off on replica 1 loses
// every console session and admin token on replica 2 at the next request; a
// restore brings back no old session (they sign in again), and their own
// token cannot restore them.
func TestOffboardingBindsOnEveryReplica(t *testing.T) {
	t.Parallel()
	o := newOffboarding(t)
	token := o.annC.adminToken(t, o.r1)
	// A second browser of Ann's that sits unused through the cut-off: a restore
	// must not bring it back.
	idle := o.signIn(t, o.r2, "ann@acme.test")
	if status, _ := api(t, http.MethodGet, o.r2+"/api/v1/members", token, ""); status != http.StatusOK || !o.annC.signedIn(t, o.r2) || !idle.signedIn(t, o.r2) {
		t.Fatalf("before the cut-off: token %d, sessions alive %v %v", status, o.annC.signedIn(t, o.r2), idle.signedIn(t, o.r2))
	}
	var listed struct{ Tokens []store.AdminToken }
	_, body := api(t, http.MethodGet, o.r2+"/api/v1/tokens", token, "")
	if err := json.Unmarshal([]byte(body), &listed); err != nil || len(listed.Tokens) != 1 || listed.Tokens[0].Owner != store.OwnerMember ||
		listed.Tokens[0].OwnerEmail != "ann@acme.test" {
		t.Fatalf("the token made in Ann's session is listed as %s, want hers", body)
	}

	status, _ := o.bC.form(t, o.r1+"/console/members/"+strconv.FormatInt(o.ann.ID, 10)+"/status", url.Values{"status": {"disabled"}, "confirm": {"yes"}}, false)
	if status != http.StatusSeeOther {
		t.Fatalf("Bo cuts Ann off on replica 1: %d", status)
	}
	if status, _ := api(t, http.MethodGet, o.r2+"/api/v1/members", token, ""); status != http.StatusUnauthorized {
		t.Errorf("Ann's token on replica 2 after her cut-off: %d, want 401", status)
	}
	if status, _ := api(t, http.MethodPost, memberPath(o.r2, o.ann.ID)+"/restore", token, ""); status != http.StatusUnauthorized {
		t.Errorf("Ann restores herself with her token: %d, want 401", status)
	}
	if o.annC.signedIn(t, o.r2) {
		t.Error("Ann's console session still works on replica 2 after her cut-off")
	}

	status, _ = o.bC.form(t, o.r1+"/console/members/"+strconv.FormatInt(o.ann.ID, 10)+"/status", url.Values{"status": {"active"}}, false)
	if status != http.StatusSeeOther {
		t.Fatalf("Bo restores Ann: %d", status)
	}
	if o.annC.signedIn(t, o.r2) || idle.signedIn(t, o.r2) {
		t.Error("a restore revived a session Ann had before her cut-off")
	}
	if !o.signIn(t, o.r2, "ann@acme.test").signedIn(t, o.r2) {
		t.Error("restored, Ann cannot sign in again")
	}
	// Her token is hers again once she is an active owner again.
	if status, _ := api(t, http.MethodGet, o.r2+"/api/v1/members", token, ""); status != http.StatusOK {
		t.Errorf("Ann's token after her restore: %d, want 200", status)
	}

	// Demoted to member, her token stops at once (a read is more than a member
	// may see); the session stays, without owner pages.
	if status, body := api(t, http.MethodPut, memberPath(o.r1, o.ann.ID)+"/role", o.bC.adminToken(t, o.r1), `{"role":"member"}`); status != http.StatusOK {
		t.Fatalf("Bo demotes Ann through his token: %d %s", status, body)
	}
	if status, _ := api(t, http.MethodGet, o.r2+"/api/v1/members", token, ""); status != http.StatusUnauthorized {
		t.Errorf("Ann's owner token after her demotion: %d, want 401", status)
	}
}

// TestNobodyDecidesTheirOwnCase: through any credential of theirs, an owner
// cannot cut themselves off, change their own role or approve their own
// budget request; the last active owner cannot be cut off or demoted.
func TestNobodyDecidesTheirOwnCase(t *testing.T) {
	t.Parallel()
	o := newOffboarding(t)
	ctx := t.Context()
	annToken := o.annC.adminToken(t, o.r1)

	problem := func(what string, status int, body string, want int) {
		t.Helper()
		var p struct{ Status int }
		if status != want || json.Unmarshal([]byte(body), &p) != nil || p.Status != want {
			t.Errorf("%s: %d %s, want a %d problem", what, status, body, want)
		}
	}
	status, body := api(t, http.MethodPost, memberPath(o.r2, o.ann.ID)+"/cut-off", annToken, "")
	problem("Ann cuts herself off with her token", status, body, http.StatusForbidden)
	status, body = api(t, http.MethodPut, memberPath(o.r2, o.ann.ID)+"/role", annToken, `{"role":"member"}`)
	problem("Ann demotes herself with her token", status, body, http.StatusForbidden)

	// Ann asks for more budget and approves it with the token she made.
	budget := int64(5_000_000)
	_, err := o.st.SetMemberLimits(ctx, store.ActorCLI, o.team, o.ann.ID, store.Limits{RatePeriod: time.Second, Budget: &budget})
	must(t, err)
	asked, err := o.st.RequestBudget(ctx, store.MemberActor(o.ann.ID), o.team, o.ann.ID, 1_000_000, "eval run")
	must(t, err)
	decide := o.r2 + "/api/v1/budget-requests/" + strconv.FormatInt(asked.ID, 10)
	status, body = api(t, http.MethodPost, decide+"/approve", annToken, `{}`)
	problem("Ann approves her own request with her token", status, body, http.StatusForbidden)
	status, body = api(t, http.MethodPost, decide+"/decline", annToken, `{"note":"x"}`)
	problem("Ann declines her own request with her token", status, body, http.StatusForbidden)
	if status, body := o.annC.form(t, o.r2+"/console/budget-requests/"+strconv.FormatInt(asked.ID, 10)+"/approve", url.Values{}, false); status != http.StatusForbidden ||
		!strings.Contains(body, "your own budget request") {
		t.Errorf("Ann approves her own request in the console: %d\n%.300s", status, body)
	}
	if reqs, err := o.st.PendingBudgetRequests(ctx, o.team); err != nil || len(reqs) != 1 {
		t.Errorf("pending requests after the refusals: %v %v, want Ann's still waiting", reqs, err)
	}

	// Bo cuts Ann off: he is now the last active owner. Nobody, not even the
	// operator's token, cuts him off or demotes him.
	_, err = o.st.SetMemberStatus(ctx, store.MemberActor(o.bo.ID), o.team, o.ann.ID, store.StatusDisabled)
	must(t, err)
	cli, err := o.st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{TeamID: &o.team, Name: "ops", Role: store.TokenRoleOwner, Lifetime: time.Hour})
	must(t, err)
	status, body = api(t, http.MethodPost, memberPath(o.r1, o.bo.ID)+"/cut-off", cli.Plaintext, "")
	problem("the last active owner cut off", status, body, http.StatusConflict)
	if !strings.Contains(body, "last active owner") {
		t.Errorf("last-owner refusal does not say why: %s", body)
	}
	status, body = api(t, http.MethodPut, memberPath(o.r1, o.bo.ID)+"/role", cli.Plaintext, `{"role":"member"}`)
	problem("the last active owner demoted", status, body, http.StatusConflict)
	if m, err := o.st.FindMember(ctx, o.team, "bo@acme.test"); err != nil || m.Status != store.StatusActive || m.Role != store.RoleOwner {
		t.Errorf("Bo after the refusals: %+v %v", m, err)
	}

	// Ann, cut off, signs in again: she sees she is cut off, and cannot restore herself.
	again := o.signIn(t, o.r2, "ann@acme.test")
	if status, _ := again.form(t, o.r2+"/console/members/"+strconv.FormatInt(o.ann.ID, 10)+"/status", url.Values{"status": {"active"}}, false); status != http.StatusForbidden {
		t.Errorf("cut-off Ann restores herself in the console: %d, want 403", status)
	}
	// Nor can anything acting as her token, past the API's own check.
	id, _, _ := apikey.Admin.Parse(annToken)
	if _, err := o.st.SetMemberStatus(ctx, store.Actor("token:"+id+":laptop"), o.team, o.ann.ID, store.StatusActive); err == nil {
		t.Error("the store let Ann's token restore her")
	}
}
