package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// operationCase is one operation of the API as a test drives it: who may call
// it, and a request that succeeds for a fresh fixture of the caller's team.
type operationCase struct {
	access api.Access
	query  string
	body   any
}

// operations is the authorization table, written out here rather than read
// from the operations' own declarations, so an operation declared with the
// wrong access fails the test. Every served operation must be in it.
var operations = map[string]operationCase{
	"GET /api/v1/members":                       {access: api.AccessRead},
	"POST /api/v1/members":                      {access: api.AccessOwner, body: map[string]any{"email": "new@acme.test"}},
	"POST /api/v1/invites":                      {access: api.AccessOwner, body: map[string]any{"email": "invited@acme.test"}},
	"GET /api/v1/members/{id}":                  {access: api.AccessRead},
	"POST /api/v1/members/{id}/cut-off":         {access: api.AccessOwner},
	"POST /api/v1/members/{id}/restore":         {access: api.AccessOwner},
	"PUT /api/v1/members/{id}/role":             {access: api.AccessOwner, body: map[string]any{"role": "owner"}},
	"GET /api/v1/tokens":                        {access: api.AccessRead},
	"GET /api/v1/members/{id}/limits":           {access: api.AccessRead},
	"PUT /api/v1/members/{id}/limits":           {access: api.AccessOwner, body: fullLimits},
	"PATCH /api/v1/members/{id}/limits":         {access: api.AccessOwner, body: map[string]any{"rate_limit": 10, "budget_usd": "5.00"}},
	"DELETE /api/v1/members/{id}":               {access: api.AccessOwner},
	"POST /api/v1/members/{id}/keys":            {access: api.AccessOwner, body: map[string]any{"name": "ci"}},
	"GET /api/v1/keys":                          {access: api.AccessRead},
	"POST /api/v1/keys/{id}/rotate":             {access: api.AccessOwner, query: "?grace=1h"},
	"POST /api/v1/keys/{id}/revoke":             {access: api.AccessOwner},
	"GET /api/v1/routes":                        {access: api.AccessRead},
	"POST /api/v1/routes":                       {access: api.AccessOwner, body: map[string]any{"preset": "openai", "upstream_url": "http://127.0.0.1:2"}},
	"PUT /api/v1/routes/{id}":                   {access: api.AccessOwner, body: map[string]any{"preset": "anthropic", "upstream_url": "http://127.0.0.1:3"}},
	"PUT /api/v1/routes/{id}/resilience":        {access: api.AccessOwner, body: map[string]any{"max_attempts": 2, "health_path": "/v1/models"}},
	"POST /api/v1/routes/{id}/targets":          {access: api.AccessOwner, body: map[string]any{"upstream_url": "http://127.0.0.1:5"}},
	"DELETE /api/v1/routes/{id}":                {access: api.AccessOwner},
	"DELETE /api/v1/routes/{id}/targets":        {access: api.AccessOwner, query: "?upstream_url=http%3A%2F%2F127.0.0.1%3A4"},
	"GET /api/v1/limits":                        {access: api.AccessRead},
	"PUT /api/v1/limits":                        {access: api.AccessOwner, body: fullLimits},
	"PATCH /api/v1/limits":                      {access: api.AccessOwner, body: map[string]any{"concurrency": 5, "budget_micros": 100_000_000, "budget_period": "daily"}},
	"GET /api/v1/prices":                        {access: api.AccessAnyToken},
	"PUT /api/v1/prices/{model}":                {access: api.AccessDeployment, body: map[string]any{"input_micros_per_mtok": 3_000_000, "output_micros_per_mtok": 15_000_000, "max_output_tokens": 64_000}},
	"GET /api/v1/usage":                         {access: api.AccessRead, query: "?limit=10"},
	"GET /api/v1/audit":                         {access: api.AccessRead, query: "?limit=10"},
	"GET /api/v1/reconcile":                     {access: api.AccessRead},
	"GET /api/v1/tiers":                         {access: api.AccessRead},
	"POST /api/v1/tiers":                        {access: api.AccessOwner, body: map[string]any{"name": "bots", "weight": 3, "limits": map[string]any{"concurrency": 2}}},
	"GET /api/v1/tiers/{name}":                  {access: api.AccessRead},
	"PUT /api/v1/tiers/{name}":                  {access: api.AccessOwner, body: map[string]any{"limits": fullLimits, "weight": 1, "auto_approve_micros": 1_000_000, "over_budget": "refuse"}},
	"PATCH /api/v1/tiers/{name}":                {access: api.AccessOwner, body: map[string]any{"limits": map[string]any{"rate_limit": 5}, "auto_approve_usd": "1.00"}},
	"DELETE /api/v1/tiers/{name}":               {access: api.AccessOwner},
	"PUT /api/v1/members/{id}/tier":             {access: api.AccessOwner, body: map[string]any{"tier": "core"}},
	"GET /api/v1/members/{id}/effective-limits": {access: api.AccessRead},
	"GET /api/v1/budget-requests":               {access: api.AccessRead},
	"POST /api/v1/budget-requests/{id}/approve": {access: api.AccessOwner, body: map[string]any{"note": "ok"}},
	"POST /api/v1/budget-requests/{id}/decline": {access: api.AccessOwner, body: map[string]any{"note": "no"}},
	"GET /api/v1/webhooks":                      {access: api.AccessOwner},
	"POST /api/v1/webhooks":                     {access: api.AccessOwner, body: map[string]any{"name": "chat", "url": "http://127.0.0.1:7/x", "format": "slack"}},
	"DELETE /api/v1/webhooks/{id}":              {access: api.AccessOwner},
	"POST /api/v1/webhooks/{id}/test":           {access: api.AccessOwner},
}

// fullLimits names every limit, as a PUT must.
var fullLimits = map[string]any{"rate_algorithm": "token_bucket", "rate_limit": 10, "rate_period": "1s", "rate_burst": nil,
	"concurrency": nil, "tokens_per_minute": nil, "budget_usd": "5.00", "budget_period": "monthly"}

// servedOperations walks the router: every "METHOD pattern" it serves under
// /api/v1, but for the document itself, its reference page and the catch-all
// that answers unknown paths.
func servedOperations(t *testing.T, e *env) []string {
	t.Helper()
	var ops []string
	err := chi.Walk(e.routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, api.Prefix+"/") && !strings.HasPrefix(route, api.Prefix+"/openapi") && route != api.Prefix+"/*" &&
			route != views.APIReferenceURL {
			ops = append(ops, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// path fills an operation's pattern with f's ids.
func (f fixture) path(pattern string) string {
	r := strings.NewReplacer("/members/{id}", "/members/"+strconv.FormatInt(f.member.ID, 10), "/keys/{id}", "/keys/"+f.key.ID,
		"/routes/{id}", "/routes/"+strconv.FormatInt(f.route.ID, 10), "{model}", "test-model",
		"/tiers/{name}", "/tiers/"+f.tier.Name, "/budget-requests/{id}", "/budget-requests/"+strconv.FormatInt(f.request.ID, 10),
		"/webhooks/{id}", "/webhooks/"+strconv.FormatInt(f.webhook.ID, 10))
	return r.Replace(pattern)
}

// TestEveryOperationHasAnAuthorizationDecision fails when an operation is
// served without an entry in the table above, and checks each decision: no
// token and a bad token are 401; a read token on a write, a team token on a
// deployment operation and a deployment token on a team's are 403; a token of
// another team gets 404 for this team's members, keys and routes, and sees
// none of them in its lists. All in problem+json, and none writes an audit row.
func TestEveryOperationHasAnAuthorizationDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme, beta := e.team("acme"), e.team("beta")
	f := e.fixture(acme, "ada@acme.test")
	read, betaOwner := e.token(&acme.ID, store.TokenRoleRead), e.token(&beta.ID, store.TokenRoleOwner)
	deployment, deploymentRead := e.token(nil, store.TokenRoleOwner), e.token(nil, store.TokenRoleRead)
	revoked := e.token(&acme.ID, store.TokenRoleOwner)
	if _, err := e.st.RevokeAdminToken(t.Context(), store.ActorCLI, &acme.ID, strings.Split(revoked, "_")[1]); err != nil {
		t.Fatal(err)
	}

	served := servedOperations(t, e)
	if len(served) != len(operations) {
		t.Errorf("the router serves %d operations, the table has %d:\n%v", len(served), len(operations), served)
	}
	for _, op := range served {
		c, ok := operations[op]
		if !ok {
			t.Errorf("%s has no authorization decision in the table", op)
			continue
		}
		method, pattern, _ := strings.Cut(op, " ")
		path := f.path(pattern) + c.query
		before := e.auditCount()

		e.call("", method, path, c.body).problem(t, http.StatusUnauthorized)
		e.call(revoked, method, path, c.body).problem(t, http.StatusUnauthorized)
		e.call("tg_"+f.key.Plaintext[3:], method, path, c.body).problem(t, http.StatusUnauthorized) // a member key is no admin token
		switch c.access {
		case api.AccessOwner:
			e.call(read, method, path, c.body).problem(t, http.StatusForbidden)
			e.call(deployment, method, path, c.body).problem(t, http.StatusForbidden)
		case api.AccessRead:
			e.call(deployment, method, path, c.body).problem(t, http.StatusForbidden)
		case api.AccessDeployment:
			e.call(read, method, path, c.body).problem(t, http.StatusForbidden)
			e.call(betaOwner, method, path, c.body).problem(t, http.StatusForbidden)
			e.call(deploymentRead, method, path, c.body).problem(t, http.StatusForbidden)
		case api.AccessAnyToken:
		default:
			t.Errorf("%s: unknown access %q in the table", op, c.access)
		}
		if c.access == api.AccessRead || c.access == api.AccessOwner {
			if strings.Contains(pattern, "{id}") {
				e.call(betaOwner, method, path, c.body).problem(t, http.StatusNotFound)
			} else if method == http.MethodGet {
				r := e.call(betaOwner, method, path, c.body)
				for _, secret := range []string{f.member.Email, f.key.ID, `"prefix":"/anthropic"`} {
					if strings.Contains(string(r.body), secret) {
						t.Errorf("%s by another team's token shows %s: %s", op, secret, r.body)
					}
				}
			}
		}
		if after := e.auditCount(); after != before {
			t.Errorf("%s: refused requests wrote %d audit rows", op, after-before)
		}
	}
}

// TestUnknownPathsAreProblems: a path (or a method on a path) under /api/v1
// that is no operation is a problem, not the gateway's provider-shaped 404
// (nor HTML).
func TestUnknownPathsAreProblems(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	e.call(owner, http.MethodGet, "/api/v1/nothing-here", nil).problem(t, http.StatusNotFound)
	e.call("", http.MethodGet, "/api/v1", nil).problem(t, http.StatusNotFound)
	// A known path with a method it does not take: 405 (TestWrongMethodIsMethodNotAllowed checks every path).
	e.call(owner, http.MethodPatch, "/api/v1/members", nil).problem(t, http.StatusMethodNotAllowed)
}
