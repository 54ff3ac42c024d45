package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// consoleRoutes walks the mounted router: every "METHOD pattern" it serves
// under /console.
func consoleRoutes(t *testing.T, e *env) []string {
	t.Helper()
	var routes []string
	err := chi.Walk(e.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, "/console") {
			routes = append(routes, method+" "+route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return routes
}

// TestEveryRouteHasAnAuthorizationDecision fails when a console route is
// registered without an entry in the access table, and checks each decision
// against a request: no session, a member's session, and (for every write) a
// cross-origin request with an owner's session. No GET may change anything.
func TestEveryRouteHasAnAuthorizationDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	access := e.console.RouteAccess()
	routes := consoleRoutes(t, e)
	if len(routes) != len(access) {
		t.Errorf("router serves %d console routes, the access table has %d:\n%v\n%v", len(routes), len(access), routes, access)
	}
	owner, _ := e.owner("acme", "owner@acme.test")
	member, _ := e.invite(owner, "ada@acme.test")
	anon := e.client()
	param := regexp.MustCompile(`\{[a-z]+\}`)

	for _, route := range routes {
		decision, ok := access[route]
		if !ok {
			t.Errorf("%s has no authorization decision in the console's route table", route)
			continue
		}
		method, pattern, _ := strings.Cut(route, " ")
		path := param.ReplaceAllString(pattern, "1")
		var form url.Values
		if method == http.MethodPost {
			form = url.Values{}
		}
		before := e.auditCount()

		if decision != "anyone" {
			// A page asked for by its address is where sign-in returns to.
			signin := "/console/signin"
			if method == http.MethodGet && path != "/console/" {
				signin += "?next=" + url.QueryEscape(path)
			}
			if r := anon.do(method, path, form, nil); r.status != http.StatusSeeOther || r.header.Get("Location") != signin {
				t.Errorf("%s without a session: %d to %q, want 303 to %s", route, r.status, r.header.Get("Location"), signin)
			}
			r := anon.do(method, path, form, map[string]string{"HX-Request": "true"})
			if r.status != http.StatusUnauthorized || r.header.Get("HX-Redirect") != "/console/signin" {
				t.Errorf("%s from HTMX without a session: %d (HX-Redirect %q), want 401 redirecting to sign-in", route, r.status, r.header.Get("HX-Redirect"))
			}
			if r := anon.do(method, path, form, map[string]string{"Accept": "text/event-stream"}); r.status != http.StatusOK ||
				r.body != "event: signedout\ndata: /console/signin\n\n" {
				t.Errorf("%s from an EventSource without a session: %d %q, want only the signedout event", route, r.status, r.body)
			}
		}
		if decision == "owner" {
			if r := member.do(method, path, form, nil); r.status != http.StatusForbidden {
				t.Errorf("%s as a member: %d, want 403", route, r.status)
			}
		}
		if method == http.MethodGet && strings.HasSuffix(path, "/live") {
			owner.firstEvent(path) // an event stream: read its first event and leave
		} else if method == http.MethodGet {
			owner.get(path) // must change nothing: checked below
		}
		if method == http.MethodPost {
			for _, h := range []map[string]string{
				{"Sec-Fetch-Site": "cross-site"},
				{"Sec-Fetch-Site": "same-site"},
				{"Origin": "https://evil.example"},
				{"Origin": "null"},
			} {
				if r := owner.do(method, path, form, h); r.status != http.StatusForbidden {
					t.Errorf("%s cross-origin %v: %d, want 403", route, h, r.status)
				}
			}
		}
		if after := e.auditCount(); after != before {
			t.Errorf("%s: refused requests or a GET wrote %d audit rows", route, after-before)
		}
	}
}
