package sso_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/sso"
)

// TestDiscoveredEndpointsAreGuarded: an allowed issuer whose discovery
// document names a token endpoint or key set on an address the gateway
// refuses is refused, naming which endpoint and why, though the endpoint
// answers as a provider would (here: the issuer itself, reached via 0.0.0.0,
// accepting the client).
func TestDiscoveredEndpointsAreGuarded(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	via0 := "http://0.0.0.0:" + port
	var endpoints sync.Map // issuer path -> the endpoint its document names
	mux.HandleFunc("GET /{issuer}/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		issuer := srv.URL + "/" + r.PathValue("issuer")
		doc := map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/authorize",
			"token_endpoint": issuer + "/token", "jwks_uri": issuer + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"}}
		for k, v := range map[string]string{"token": "token_endpoint", "jwks": "jwks_uri"} {
			if e, ok := endpoints.Load(k); ok && r.PathValue("issuer") == k {
				doc[v] = e
			}
		}
		json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"}) // the client passed
	})
	endpoints.Store("token", via0+"/x/token")
	endpoints.Store("jwks", "http://169.254.169.254/latest/meta-data/jwks")
	client := sso.New(sso.Options{Outbound: apptest.Outbound()})
	probe := func(issuer string) error {
		return client.Probe(t.Context(), sso.Config{Kind: sso.KindOIDC, IssuerURL: srv.URL + "/" + issuer, ClientID: "id", ClientSecret: "s", RedirectURL: "http://gw/cb"})
	}
	if err := probe("honest"); err != nil {
		t.Fatalf("an issuer whose endpoints are allowed: %v", err)
	}
	for issuer, want := range map[string]string{
		"token": "token_endpoint the gateway refuses to call: 0.0.0.0:" + port + " is a link-local, metadata, unspecified",
		"jwks":  "jwks_uri the gateway refuses to call: 169.254.169.254:80 is a link-local",
	} {
		if err := probe(issuer); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("discovery naming a %s at a refused address: %v, want %q", issuer, err, want)
		}
	}
	// Private, not allow-listed.
	endpoints.Store("token", "http://10.255.0.1/token")
	if err := probe("token"); err == nil || !strings.Contains(err.Error(), "OUTBOUND_ALLOW") {
		t.Errorf("discovery naming a token endpoint on a private address: %v, want refused naming OUTBOUND_ALLOW", err)
	}
}
