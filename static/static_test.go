package static_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/static"
)

func TestHandlerServesOnlyEmbeddedFiles(t *testing.T) {
	t.Parallel()
	h := static.Handler()
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	for _, name := range []string{"htmx.min.js", "htmx-ext-sse.min.js", "console.js", "console.css", "htmx.LICENSE", "htmx-ext-sse.LICENSE"} {
		rec := get(static.Path(name))
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d, %d bytes, Cache-Control %q", name, rec.Code, rec.Body.Len(), rec.Header().Get("Cache-Control"))
		}
	}
	if rec := get("/static/console.css?v=stale"); rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("stale version: %d, Cache-Control %q, want no-cache", rec.Code, rec.Header().Get("Cache-Control"))
	}
	for _, path := range []string{"/static/", "/static/static.go", "/static/../go.mod", "/static/nope.js"} {
		if rec := get(path); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
}
