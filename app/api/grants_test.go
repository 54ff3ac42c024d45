package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/store"
)

const victimSecret = "victim-PLANTED-credential-5e1d"

// recorder is a server of the attacker's: it keeps every header that reaches it.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	io.Copy(io.Discard, req.Body)
	w.Write([]byte(`{}`))
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.headers)
}

// An owner of one team on a shared gateway, through their admin token, tries
// every way of getting a credential of the deployment's or of another team's
// sent to a server of their own. Each writer refuses, naming the field; a
// route stored around the writers is disabled at snapshot load, its callers
// told why, and nothing reaches the attacker's server.
func TestCredentialGrantsHoldForAnotherTeamsOwner(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	attacker := httptest.NewServer(rec)
	t.Cleanup(attacker.Close)
	e := newEnv(t, map[string]string{
		"ANTHROPIC_API_KEY":          "sk-ant-PLANTED-deployment-key",
		"TOLLGATE_CREDENTIAL_VICTIM": victimSecret,
		// The loopback host stands for the victim's own upstream.
		"CREDENTIAL_GRANTS": "TOLLGATE_CREDENTIAL_VICTIM: hosts=localhost teams=victim",
	})
	victim := e.team("victim")
	mallory := e.team("mallory")
	token := e.token(&mallory.ID, store.TokenRoleOwner)
	ctx := context.Background()

	refused := func(name, field string, r response) {
		t.Helper()
		var p api.Problem
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != http.StatusUnprocessableEntity ||
			len(p.Errors) != 1 || p.Errors[0].Location != "body."+field {
			t.Errorf("%s: %d %s, want 422 naming %s", name, r.status, r.body, field)
		}
	}
	refused("the deployment's Anthropic key to the attacker", "upstream", e.call(token, http.MethodPost, api.Prefix+"/routes",
		map[string]string{"preset": "anthropic", "prefix": "/steal", "upstream_url": attacker.URL}))
	refused("another team's credential to its own host", "credential_env", e.call(token, http.MethodPost, api.Prefix+"/routes",
		map[string]string{"prefix": "/steal", "upstream_url": strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1),
			"dialect": "anthropic", "credential_header": "x-api-key", "credential_env": "TOLLGATE_CREDENTIAL_VICTIM"}))
	refused("another team's credential to the attacker", "credential_env", e.call(token, http.MethodPost, api.Prefix+"/routes",
		map[string]string{"prefix": "/steal", "upstream_url": attacker.URL,
			"dialect": "anthropic", "credential_header": "x-api-key", "credential_env": "TOLLGATE_CREDENTIAL_VICTIM"}))

	// A route of mallory's own (no credential) may not gain one by an update
	// or spread a granted one to the attacker through an added target.
	plain := e.call(token, http.MethodPost, api.Prefix+"/routes", map[string]string{"prefix": "/plain", "upstream_url": attacker.URL, "dialect": "generic"})
	if plain.status != http.StatusCreated {
		t.Fatalf("a route without a credential: %d %s", plain.status, plain.body)
	}
	var route store.Route
	json.Unmarshal(plain.body, &route)
	refused("an update adding the deployment's key", "upstream", e.call(token, http.MethodPut, api.Prefix+"/routes/"+strconv.FormatInt(route.ID, 10),
		map[string]string{"prefix": "/plain", "upstream_url": attacker.URL, "dialect": "anthropic", "credential_header": "x-api-key",
			"credential_env": "ANTHROPIC_API_KEY"}))
	official := e.call(token, http.MethodPost, api.Prefix+"/routes", map[string]string{"preset": "anthropic"})
	if official.status != http.StatusCreated {
		t.Fatalf("the Anthropic preset to Anthropic: %d %s", official.status, official.body)
	}
	json.Unmarshal(official.body, &route)
	refused("a target carrying the route's key to the attacker", "upstream", e.call(token, http.MethodPost,
		api.Prefix+"/routes/"+strconv.FormatInt(route.ID, 10)+"/targets", map[string]string{"upstream_url": attacker.URL}))

	// Stored around every writer: the snapshot disables the route.
	conn, err := pgx.Connect(ctx, e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for prefix, env := range map[string]string{"/raw-deployment": "ANTHROPIC_API_KEY", "/raw-victim": "TOLLGATE_CREDENTIAL_VICTIM"} {
		if _, err := conn.Exec(ctx, `INSERT INTO route (team_id, prefix, upstream_url, dialect, credential_header, credential_env, credential_format)
			VALUES ($1, $2, $3, 'anthropic', 'x-api-key', $4, '{}')`, mallory.ID, prefix, attacker.URL, env); err != nil {
			t.Fatal(err)
		}
	}
	member, err := e.st.AddMember(ctx, store.ActorCLI, mallory.ID, "mal@mallory.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.st.IssueKey(ctx, store.ActorCLI, mallory.ID, member.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Snapshots.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"/raw-deployment", "/raw-victim"} {
		req, _ := http.NewRequest(http.MethodPost, e.url+prefix+"/v1/messages",
			strings.NewReader(`{"model":"claude-sonnet-4-6","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", key.Plaintext)
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "disabled") {
			t.Errorf("POST %s: %d %s, want 403 in Anthropic's shape saying the route is disabled", prefix, resp.StatusCode, body)
		}
	}
	if n := rec.calls(); n != 0 {
		t.Fatalf("the attacker's server was called %d times: %v", n, rec.headers)
	}
	// The team's owners see which routes are disabled, and why.
	var list struct{ Routes []store.Route }
	json.Unmarshal(e.call(token, http.MethodGet, api.Prefix+"/routes", nil).body, &list)
	disabled := map[string]string{}
	for _, r := range list.Routes {
		disabled[r.Prefix] = r.Disabled
	}
	if !strings.Contains(disabled["/raw-deployment"], "may only be sent to api.anthropic.com") ||
		!strings.Contains(disabled["/raw-victim"], "not granted to team mallory") || disabled["/anthropic"] != "" {
		t.Errorf("disabled reasons: %q", disabled)
	}
	// The victim's own route with its credential is untouched.
	if _, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: victim.ID, Prefix: "/own", UpstreamURL: "http://localhost:1",
		Dialect: "anthropic", CredentialHeader: "x-api-key", CredentialEnv: "TOLLGATE_CREDENTIAL_VICTIM"}); err != nil {
		t.Errorf("the victim's granted route: %v", err)
	}
}
