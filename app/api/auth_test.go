package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

// TestTokensAreRateLimitedAndBadOnesReported: each token has its own request
// rate, refused with a 429 problem and Retry-After once spent; every refused
// token is a security event saying why, and no log line holds a secret.
func TestTokensAreRateLimitedAndBadOnesReported(t *testing.T) {
	t.Parallel()
	st := store.New(dbtest.Pool(t, dbtest.Schema(t)))
	logs := &apptest.SyncBuffer{}
	a := api.New(api.Options{Store: st, Limiter: limiter.NewLocal(nil), Logger: slog.New(slog.NewJSONHandler(logs, nil)), RequestsPerMinute: 3})
	r := chi.NewRouter()
	a.Mount(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	team, err := st.CreateTeam(ctx, store.ActorCLI, "acme")
	if err != nil {
		t.Fatal(err)
	}
	newToken := func(name string) store.IssuedAdminToken {
		tok, err := st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{TeamID: &team.ID, Name: name, Role: store.TokenRoleRead, Lifetime: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	busy, calm, revoked := newToken("busy"), newToken("calm"), newToken("old")
	if _, err := st.RevokeAdminToken(ctx, store.ActorCLI, &team.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	get := func(authorization string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/members", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 3 {
		if resp := get("Bearer " + busy.Plaintext); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the rate: %d", i, resp.StatusCode)
		}
	}
	limited := get("Bearer " + busy.Plaintext)
	if limited.StatusCode != http.StatusTooManyRequests || limited.Header.Get("Retry-After") == "" ||
		limited.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("past the rate: %d Retry-After %q %s, want a 429 problem with Retry-After", limited.StatusCode,
			limited.Header.Get("Retry-After"), limited.Header.Get("Content-Type"))
	}
	if resp := get("Bearer " + calm.Plaintext); resp.StatusCode != http.StatusOK {
		t.Errorf("another token of the team: %d, want its own rate", resp.StatusCode)
	}

	id, secret, _ := strings.Cut(strings.TrimPrefix(calm.Plaintext, "tga_"), "_")
	wrongSecret := "tga_" + id + "_" + strings.Repeat("a", len(secret))
	unknownID := "tga_" + strings.Repeat("a", len(id)) + "_" + secret
	faults := map[string]string{
		"":                            "missing",
		"Basic " + calm.Plaintext:     "malformed",
		"Bearer tga_short":            "malformed",
		"Bearer " + unknownID:         "unknown_id",
		"Bearer " + wrongSecret:       "wrong_secret",
		"Bearer " + revoked.Plaintext: "revoked",
	}
	for authorization := range faults {
		if resp := get(authorization); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d, want 401 with WWW-Authenticate", authorization, resp.StatusCode)
		}
	}
	seen := map[string]bool{}
	limitedSeen := false
	for line := range strings.Lines(logs.String()) {
		var ev struct {
			Msg, Control    string
			TokenName       string `json:"token_name"`
			CredentialFault string `json:"credential_fault"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Msg != "security event" {
			continue
		}
		if ev.Control == "admin_token" {
			seen[ev.CredentialFault] = true
		}
		limitedSeen = limitedSeen || ev.Control == "admin_api_rate_limit" && ev.TokenName == "busy"
	}
	for _, fault := range faults {
		if !seen[fault] {
			t.Errorf("no admin_token security event with credential_fault %s:\n%s", fault, logs)
		}
	}
	if !limitedSeen {
		t.Errorf("no admin_api_rate_limit security event naming the token:\n%s", logs)
	}
	for _, tok := range []store.IssuedAdminToken{busy, calm, revoked} {
		if s := tok.Plaintext[len(tok.Plaintext)-52:]; strings.Contains(logs.String(), s) {
			t.Errorf("token %s's secret is in the log", tok.Name)
		}
	}
}
