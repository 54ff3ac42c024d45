package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/views"
)

// TestReferenceListsEveryOperation: the gateway's API reference page shows
// every operation of the OpenAPI document it serves, each with its
// parameters, its request body's fields and its answer, and the shape of
// every error; it references no other origin (every link, script and
// stylesheet is on this gateway) and forbids loading from one.
func TestReferenceListsEveryOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp, err := http.Get(e.url + views.APIReferenceURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %d %s", views.APIReferenceURL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "http") {
		t.Errorf("Content-Security-Policy %q, want nothing from elsewhere", csp)
	}
	page, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}

	count := 0
	for path, item := range e.doc.Paths.Map() {
		for method, op := range item.Operations() {
			count++
			section := page.Find(`[data-operation="` + op.OperationID + `"]`)
			if section.Length() != 1 {
				t.Errorf("%s %s (%s) is not on the page", method, path, op.OperationID)
				continue
			}
			text := section.Text()
			if !strings.Contains(section.Find("h2").Text(), method+" "+path) || !strings.Contains(text, op.Summary) {
				t.Errorf("%s: heading %q, want %s %s and its summary", op.OperationID, section.Find("h2").Text(), method, path)
			}
			for _, p := range op.Parameters {
				if !strings.Contains(text, p.Value.Name) {
					t.Errorf("%s: parameter %s is not shown", op.OperationID, p.Value.Name)
				}
			}
			if op.RequestBody != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil {
					for name := range mt.Schema.Value.Properties {
						if !strings.Contains(text, name) {
							t.Errorf("%s: request field %s is not shown", op.OperationID, name)
						}
					}
				}
			}
			for code, r := range op.Responses.Map() {
				if !strings.Contains(text, code) {
					t.Errorf("%s: response %s is not shown", op.OperationID, code)
				}
				if mt := r.Value.Content.Get("application/json"); mt != nil && code < "300" {
					for name := range mt.Schema.Value.Properties {
						if !strings.Contains(text, name) {
							t.Errorf("%s: response field %s is not shown", op.OperationID, name)
						}
					}
				}
			}
		}
	}
	if n := page.Find(`[data-testid="operation"]`).Length(); n != count || count == 0 {
		t.Errorf("the page shows %d operations, the document has %d", n, count)
	}
	errors := page.Find("#errors").Text()
	for _, field := range []string{"type", "title", "status", "detail", "errors[].location", "errors[].message", "application/problem+json"} {
		if !strings.Contains(errors, field) {
			t.Errorf("the error shape does not show %s", field)
		}
	}
	page.Find("[href], [src], [action]").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"href", "src", "action"} {
			if v, ok := s.Attr(attr); ok && (!strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "#") || strings.HasPrefix(v, "//")) {
				t.Errorf("%s=%q refers elsewhere", attr, v)
			}
		}
	})
}
