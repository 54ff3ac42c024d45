package console_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// internalAnswer is what a service the gateway must not reach says: a page
// that shows any of it has leaked it.
const internalAnswer = `tollgate_spend_micros_total{team="other",member="m"} 123456 INTERNAL-PLANTED`

// internalService answers every request with internalAnswer and a 500, on loopback.
func internalService(t *testing.T) (host, port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, internalAnswer, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	host, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return host, port
}

// withOutbound makes the console (its sign-in flows and its writes) use g.
func withOutbound(g *netguard.Guard) option {
	return func(o *console.Options) {
		o.SSO.Outbound = g
		o.Store = o.Store.WithOutbound(g)
	}
}

// TestSSOIssuerGuarded: an issuer on 0.0.0.0, or on loopback that the
// deployment does not allow, is refused when saved, and when stored anyway is
// refused at sign-in; no page shows anything the address answered.
func TestSSOIssuerGuarded(t *testing.T) {
	t.Parallel()
	_, port := internalService(t)
	e := newEnv(t, withSecrets(map[string]string{oidcSecretEnv: "s"}), withOutbound(netguard.New(netguard.Options{})))
	owner, _ := e.owner("acme", "owner@acme.test")
	form := url.Values{"display_name": {"Acme ID"}, "client_id": {"id"}, "join_policy": {"invited"}, "enabled": {"on"}}
	noLeak := func(what string, r response) {
		t.Helper()
		if strings.Contains(r.body, "INTERNAL-PLANTED") || strings.Contains(r.body, "tollgate_spend") {
			t.Errorf("%s: the page shows what the address answered", what)
		}
	}
	for issuer, reason := range map[string]string{
		"http://0.0.0.0:" + port + "/":   "unspecified",
		"http://127.0.0.1:" + port + "/": "OUTBOUND_ALLOW",
		"http://localhost:" + port:       "OUTBOUND_ALLOW",
		"http://169.254.169.254/":        "link-local",
	} {
		form.Set("issuer_url", issuer)
		r := owner.post("/console/team/sign-in/sso/oidc", form)
		noLeak("save "+issuer, r)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.text("form-error"), reason) {
			t.Errorf("save issuer %s: %d %q, want 422 naming %q", issuer, r.status, r.text("form-error"), reason)
		}
	}

	// Stored past the console's check, as an old row or a hand edit would be:
	// refused at sign-in.
	team, err := e.st.FindTeam(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetSSOMethod(t.Context(), store.ActorCLI, store.SSOMethod{TeamID: team.ID, Kind: store.SignInOIDC,
		IssuerURL: "https://id.example", ClientID: "id", JoinPolicy: store.JoinInvited, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	for _, issuer := range []string{"http://127.0.0.1:" + port, "http://0.0.0.0:" + port} {
		if _, err := e.pool.Exec(t.Context(), "UPDATE team_sso SET issuer_url = $1 WHERE team_id = $2", issuer, team.ID); err != nil {
			t.Fatal(err)
		}
		r := e.client().get("/console/signin/acme/oidc")
		noLeak("sign in through "+issuer, r)
		if r.status != http.StatusBadGateway || !strings.Contains(r.text("form-error"), "is refused") {
			t.Errorf("sign in through %s: %d %q, want 502 saying the issuer is refused", issuer, r.status, r.text("form-error"))
		}
	}
}

// TestSSOIssuerFailureQuotesNothing: an allowed issuer whose discovery fails
// is named with its status only, not the body it sent.
func TestSSOIssuerFailureQuotesNothing(t *testing.T) {
	t.Parallel()
	_, port := internalService(t)
	e := newEnv(t, withSecrets(map[string]string{oidcSecretEnv: "s"})) // loopback allowed
	owner, _ := e.owner("acme", "owner@acme.test")
	form := url.Values{"display_name": {"Acme ID"}, "client_id": {"id"}, "join_policy": {"invited"}, "enabled": {"on"},
		"issuer_url": {"http://127.0.0.1:" + port}}
	r := owner.post("/console/team/sign-in/sso/oidc", form)
	if r.status != http.StatusOK || !strings.Contains(r.text("sso-check"), "answered HTTP 500") {
		t.Errorf("save an issuer answering 500: %d %q, want the check to name the status", r.status, r.text("sso-check"))
	}
	if strings.Contains(r.body, "INTERNAL-PLANTED") {
		t.Error("the settings page quotes the issuer's answer")
	}
}
