package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// TestCheckConfigTriesSingleSignOn: `serve --check-config --connect` tries
// every team's enabled sign-in method and names, on its own line, the one
// whose secret is wrong, the one whose secret is missing, and the one whose
// issuer does not answer, by team and variable, without the secret.
func TestCheckConfigTriesSingleSignOn(t *testing.T) {
	t.Parallel()
	provider, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { provider.Shutdown() })
	dbURL := dbtest.Schema(t)
	st := store.New(dbtest.Pool(t, dbURL)).WithOutbound(apptest.Outbound())
	ctx := t.Context()
	for team, issuer := range map[string]string{"good": provider.Issuer(), "wrong-secret": provider.Issuer(),
		"no-secret": provider.Issuer(), "gone": "http://127.0.0.1:1/oidc"} {
		tm, err := st.CreateTeam(ctx, store.ActorCLI, team)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SetSSOMethod(ctx, store.ActorCLI, store.SSOMethod{TeamID: tm.ID, Kind: store.SignInOIDC,
			IssuerURL: issuer, ClientID: provider.ClientID, JoinPolicy: store.JoinInvited, Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	const wrong = "wrong-secret-PLANTED-90ad"
	vars := map[string]string{"DATABASE_URL": dbURL, "OUTBOUND_ALLOW": apptest.LoopbackAllow,
		"TOLLGATE_SSO_GOOD_OIDC_SECRET":         provider.ClientSecret,
		"TOLLGATE_SSO_WRONG_SECRET_OIDC_SECRET": wrong,
		"TOLLGATE_SSO_GONE_OIDC_SECRET":         "irrelevant"}
	var stdout, stderr syncBuffer
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = cli.Run(runCtx, []string{"serve", "--check-config", "--connect"},
		cli.Env{Getenv: func(n string) string { return vars[n] }, Stdout: &stdout, Stderr: &stderr})
	if err == nil {
		t.Fatalf("--check-config --connect passed with broken sign-in methods:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "  sso       team good's oidc sign-in ("+provider.Issuer()+") answers and accepts its client") {
		t.Errorf("no line for the working method:\n%s", stdout.String())
	}
	lines := "\n" + err.Error() + "\n"
	for _, want := range []string{
		"\nTOLLGATE_SSO_WRONG_SECRET_OIDC_SECRET: team wrong-secret's oidc sign-in (" + provider.Issuer() + "): the provider refused the client id or secret (invalid_client)\n",
		"\nTOLLGATE_SSO_NO_SECRET_OIDC_SECRET: not set; team no-secret's oidc sign-in (" + provider.Issuer() + ") fails until it is\n",
		"\nTOLLGATE_SSO_GONE_OIDC_SECRET: team gone's oidc sign-in (http://127.0.0.1:1/oidc): the issuer http://127.0.0.1:1/oidc does not serve a usable OpenID configuration",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("--check-config --connect error lacks %q:\n%s", want, err)
		}
	}
	if strings.Contains(stdout.String()+lines+stderr.String(), wrong) {
		t.Error("the client secret appears in the output")
	}
}
