package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// env is a running gateway with a client that checks every response it gets
// from /api/v1 against the OpenAPI document the gateway serves: a status the
// document does not list, or a body outside its schema, fails the test.
type env struct {
	t      *testing.T
	url    string
	dbURL  string
	app    *app.App
	st     *store.Store
	logs   *apptest.SyncBuffer
	doc    *openapi3.T
	router routers.Router
}

func newEnv(t *testing.T, vars map[string]string) *env {
	t.Helper()
	dbURL := dbtest.Schema(t)
	r := apptest.Start(t, dbURL, vars)
	e := &env{t: t, url: r.URL, dbURL: dbURL, app: r.App, st: r.App.Store, logs: r.Logs}
	resp, err := http.Get(r.URL + api.Prefix + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET openapi.json: %d %s", resp.StatusCode, raw)
	}
	loader := openapi3.NewLoader()
	if e.doc, err = loader.LoadFromData(raw); err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := e.doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	e.doc.Servers = openapi3.Servers{{URL: r.URL}}
	if e.router, err = gorillamux.NewRouter(e.doc); err != nil {
		t.Fatal(err)
	}
	return e
}

// routes is the gateway's router, to walk.
func (e *env) routes() chi.Routes { return e.app.Routes().(chi.Routes) }

// team creates a team.
func (e *env) team(name string) store.Team {
	e.t.Helper()
	t, err := e.st.CreateTeam(context.Background(), store.ActorCLI, name)
	if err != nil {
		e.t.Fatal(err)
	}
	// Each test sets the limits it is about: no default tier, no team budget.
	if err := e.st.SetDefaultTier(context.Background(), store.ActorCLI, t.ID, store.TierNone); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.SetTeamLimits(context.Background(), store.ActorCLI, t.ID, store.NoLimits()); err != nil {
		e.t.Fatal(err)
	}
	return t
}

// token creates an admin token of team (nil: the deployment) with role.
func (e *env) token(teamID *int64, role string) string {
	e.t.Helper()
	tok, err := e.st.CreateAdminToken(context.Background(), store.ActorCLI, store.AdminTokenSpec{TeamID: teamID,
		Name: "test-" + role, Role: role, Lifetime: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Plaintext
}

// fixture is a team's member with a key and a route with one added target.
type fixture struct {
	team   store.Team
	member store.Member
	key    store.IssuedKey
	route  store.Route
	// A tier without members, and a pending request for more budget.
	tier    store.Tier
	request store.BudgetRequest
	webhook store.Webhook
}

func (e *env) fixture(team store.Team, email string) fixture {
	e.t.Helper()
	ctx := context.Background()
	f := fixture{team: team}
	var err error
	if f.member, err = e.st.AddMember(ctx, store.ActorCLI, team.ID, email, store.RoleMember); err != nil {
		e.t.Fatal(err)
	}
	if f.key, err = e.st.IssueKey(ctx, store.ActorCLI, team.ID, f.member.ID, "laptop"); err != nil {
		e.t.Fatal(err)
	}
	if _, err = e.st.Routes(ctx, team.ID); err != nil {
		e.t.Fatal(err)
	}
	if f.route, err = e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: team.ID, Preset: "anthropic", UpstreamURL: "http://127.0.0.1:1"}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.AddRouteTarget(ctx, store.ActorCLI, team.ID, f.route.Prefix, store.RouteTarget{UpstreamURL: "http://127.0.0.1:4"}); err != nil {
		e.t.Fatal(err)
	}
	if f.tier, err = e.st.CreateTier(ctx, store.ActorCLI, team.ID, store.NewTier("core")); err != nil {
		e.t.Fatal(err)
	}
	budget := int64(5_000_000)
	if _, err = e.st.SetMemberLimits(ctx, store.ActorCLI, team.ID, f.member.ID, store.Limits{RatePeriod: time.Second, Budget: &budget}); err != nil {
		e.t.Fatal(err)
	}
	if f.request, err = e.st.RequestBudget(ctx, store.MemberActor(f.member.ID), team.ID, f.member.ID, 2_000_000, "eval run"); err != nil {
		e.t.Fatal(err)
	}
	if f.webhook, err = e.st.CreateWebhook(ctx, store.ActorCLI, team.ID, "ops", "http://127.0.0.1:6/hook", store.WebhookSigned); err != nil {
		e.t.Fatal(err)
	}
	return f
}

// auditCount is how many audit rows exist, in every team.
func (e *env) auditCount() int {
	e.t.Helper()
	entries, err := e.st.Audit(context.Background(), nil, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(entries)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request to the API (token "" sends none) and checks the
// response against the document. body is JSON-encoded unless it is a string.
func (e *env) call(token, method, path string, body any, headers ...string) response {
	e.t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, reader)
	if err != nil {
		e.t.Fatal(err)
	}
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: raw}
	e.conforms(req, r)
	return r
}

// conforms fails the test unless r is a response the document allows to req.
func (e *env) conforms(req *http.Request, r response) {
	e.t.Helper()
	route, params, err := e.router.FindRoute(req)
	if err != nil {
		// Outside the document: only a problem is an acceptable answer.
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			e.t.Errorf("%s %s is not in the document and answered %d %s", req.Method, req.URL.Path, r.status, ct)
		}
		return
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: r.status, Header: r.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(r.body)
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		e.t.Errorf("%s %s answered %d outside the document: %v\nbody: %s", req.Method, req.URL.Path, r.status, err, r.body)
	}
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %s: %v", r.status, r.body, err)
	}
}

// problem checks r is an RFC 9457 problem of status and returns it.
func (r response) problem(t *testing.T, status int) api.Problem {
	t.Helper()
	var p api.Problem
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("status %d with Content-Type %q, want application/problem+json: %s", r.status, ct, r.body)
		return p
	}
	r.decode(t, &p)
	if r.status != status || p.Status != status || !strings.HasPrefix(p.Type, "urn:tollgate:problem:") || p.Title == "" {
		t.Errorf("problem %d %+v, want status %d with a urn:tollgate:problem: type", r.status, p, status)
	}
	return p
}

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}
