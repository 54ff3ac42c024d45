package api_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestDocumentMatchesServer checks the OpenAPI document both ways. Every
// operation the router serves is in the document; every operation in the
// document is served, answering a good request with its documented success
// status and a body of its documented schema, and a request without a token
// with its documented 401 problem (env.call validates every response against
// the served document: an undocumented status or a body off its schema fails).
func TestDocumentMatchesServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if e.doc.OpenAPI != "3.1.0" {
		t.Errorf("document is OpenAPI %s, want 3.1.0", e.doc.OpenAPI)
	}
	served := servedOperations(t, e)
	var documented []string
	for path, item := range e.doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, op := range served {
		if !slices.Contains(documented, op) {
			t.Errorf("%s is served but not in the document", op)
		}
	}
	deployment := e.token(nil, store.TokenRoleOwner)
	for i, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("%s is in the document but not served", op)
			continue
		}
		c, ok := operations[op]
		if !ok {
			t.Errorf("%s has no request in the operations table", op)
			continue
		}
		method, pattern, _ := strings.Cut(op, " ")
		success := successStatus(t, e, method, pattern)
		// Each operation gets a team of its own, so a revocation or a
		// cut-off does not disturb the next.
		team := e.team("team-" + strconv.Itoa(i))
		f := e.fixture(team, "ada@team-"+strconv.Itoa(i)+".test")
		token := e.token(&team.ID, store.TokenRoleOwner)
		if c.access == "deployment" {
			token = deployment
		}
		path := f.path(pattern) + c.query
		if r := e.call(token, method, path, c.body); r.status != success {
			t.Errorf("%s: %d %s, want its documented %d", op, r.status, r.body, success)
		}
		e.call("", method, path, c.body).problem(t, http.StatusUnauthorized)
	}
}

// successStatus is the one 2xx status the document gives an operation.
func successStatus(t *testing.T, e *env, method, path string) int {
	t.Helper()
	op := e.doc.Paths.Find(path).GetOperation(method)
	var found []int
	for code := range op.Responses.Map() {
		if n, err := strconv.Atoi(code); err == nil && n >= 200 && n < 300 {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %s documents success statuses %v, want exactly one", method, path, found)
	}
	return found[0]
}

// TestProblemsFollowTheDocument: the errors a handler raises (a bad body, a
// duplicate, a stale key, a bad path parameter) are the documented problems.
func TestProblemsFollowTheDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	owner := e.token(&acme.ID, store.TokenRoleOwner)

	p := e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": "not an email"}).problem(t, http.StatusUnprocessableEntity)
	if p.Type != "urn:tollgate:problem:validation" || len(p.Errors) == 0 {
		t.Errorf("bad email: %+v, want a validation problem naming the field", p)
	}
	if p := e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": f.member.Email}).problem(t, http.StatusConflict); p.Type != "urn:tollgate:problem:conflict" {
		t.Errorf("duplicate member: %+v", p)
	}
	e.call(owner, http.MethodPost, "/api/v1/keys/"+f.key.ID+"/revoke", nil)
	if p := e.call(owner, http.MethodPost, "/api/v1/keys/"+f.key.ID+"/revoke", nil).problem(t, http.StatusConflict); p.Type != "urn:tollgate:problem:stale-state" {
		t.Errorf("revoking twice: %+v", p)
	}
	if p := e.call(owner, http.MethodGet, "/api/v1/members/abc", nil).problem(t, http.StatusUnprocessableEntity); p.Type != "urn:tollgate:problem:validation" {
		t.Errorf("bad path parameter: %+v", p)
	}
	e.call(owner, http.MethodPut, "/api/v1/limits", `{"concurrency":`).problem(t, http.StatusBadRequest)
	e.call(owner, http.MethodPut, "/api/v1/members/"+strconv.FormatInt(f.member.ID, 10)+"/limits",
		map[string]any{"rate_algorithm": "leaky"}).problem(t, http.StatusUnprocessableEntity)
	e.call(owner, http.MethodGet, "/api/v1/usage?cursor=%21%21", nil).problem(t, http.StatusUnprocessableEntity)
}

// TestWrongMethodIsMethodNotAllowed walks the document: every documented path
// asked with a method the document does not give it answers a 405 problem
// whose Allow header lists exactly the documented methods, with or without a
// token (like a 404, it reveals nothing the document does not).
func TestWrongMethodIsMethodNotAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	checked := 0
	for pattern, item := range e.doc.Paths.Map() {
		var documented []string
		for method := range item.Operations() {
			documented = append(documented, method)
		}
		slices.Sort(documented)
		path := f.path(pattern)
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if slices.Contains(documented, method) {
				continue
			}
			for _, token := range []string{owner, ""} {
				r := e.call(token, method, path, nil)
				p := r.problem(t, http.StatusMethodNotAllowed)
				if p.Type != "urn:tollgate:problem:method-not-allowed" {
					t.Errorf("%s %s: problem type %q", method, pattern, p.Type)
				}
				if got, want := r.header.Get("Allow"), strings.Join(documented, ", "); got != want {
					t.Errorf("%s %s: Allow %q, want %q", method, pattern, got, want)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no documented path lacks a method: nothing was checked")
	}
	// An unknown path stays a 404.
	e.call(owner, http.MethodDelete, "/api/v1/no-such-thing", nil).problem(t, http.StatusNotFound)
}
