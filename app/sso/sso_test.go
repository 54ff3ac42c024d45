package sso_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/sso"
)

// TestProbeBlamesOnlyTheClient: a provider that complains about the made-up
// code has accepted the client, whatever its word for the complaint; only an
// OAuth client error or a token endpoint that does not speak OAuth fails the
// check, and the provider's description (which may echo the secret) is never
// quoted.
func TestProbeBlamesOnlyTheClient(t *testing.T) {
	t.Parallel()
	var answer atomic.Value // the token endpoint's error code; "" answers HTTP 500 without one
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "jwks_uri": srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		code := answer.Load().(string)
		if code == "" {
			http.Error(w, "upstream exploded", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "you sent PLANTED-secret"})
	})
	client := sso.New(sso.Options{Outbound: apptest.Outbound()})
	cfg := sso.Config{Kind: sso.KindOIDC, IssuerURL: srv.URL, ClientID: "id", ClientSecret: "PLANTED-secret", RedirectURL: "http://gw/cb"}
	for _, tc := range []struct {
		answer string
		want   string // "" for a pass
	}{
		{"invalid_grant", ""},
		{"invalid_request", ""},
		{"invalid_client", "the provider refused the client id or secret (invalid_client)"},
		{"unauthorized_client", "the provider refused the client id or secret (unauthorized_client)"},
		{"", "the provider's token endpoint answered HTTP 500 without an OAuth error"},
	} {
		answer.Store(tc.answer)
		err := client.Probe(t.Context(), cfg)
		var pe *sso.ProviderError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("provider answering %q: %v, want the check to pass", tc.answer, err)
		case tc.want != "" && (!errors.As(err, &pe) || pe.Problem != tc.want):
			t.Errorf("provider answering %q: %v, want a provider problem %q", tc.answer, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "PLANTED"):
			t.Errorf("provider answering %q: the description was quoted: %v", tc.answer, err)
		}
	}
	if err := client.Probe(t.Context(), sso.Config{Kind: sso.KindOIDC, IssuerURL: srv.URL + "/elsewhere", ClientID: "id"}); err == nil ||
		!strings.Contains(err.Error(), "does not serve a usable OpenID configuration") {
		t.Errorf("an issuer without discovery: %v", err)
	}
}
