package console_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/static"
)

func TestSignInReturnsToThePageAskedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	wantRedirect(t, "sign out", owner.post("/console/signout", url.Values{}), "/console/signin?signed_out")

	// A page asked for while signed out is where sign-in leads.
	c := e.client()
	wantRedirect(t, "a page while signed out", c.get("/console/members?x=1"), "/console/signin?next=%2Fconsole%2Fmembers%3Fx%3D1")
	form := c.get("/console/signin?next=%2Fconsole%2Fmembers%3Fx%3D1")
	if next, _ := form.doc.Find(`input[name="next"]`).Attr("value"); next != "/console/members?x=1" {
		t.Fatalf("the sign-in form carries next %q", next)
	}
	wantRedirect(t, "sign in", c.post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {password},
		"next": {"/console/members?x=1"}}), "/console/members?x=1")
	// Signed in already, the sign-in page sends the member on too.
	wantRedirect(t, "the sign-in page when signed in", c.get("/console/signin?next=%2Fconsole%2Faudit"), "/console/audit")

	// Anything that is not a console path on this origin leads home instead.
	for _, next := range []string{"//evil.com", "/\\evil.com", "https://evil.com", "http:/evil.com", "/console\\@evil.com",
		"/console/\\/evil.com", "\\\\evil.com", "javascript:alert(1)", "/console/\t/evil.com", "/evil", "evil.com", "/consolex"} {
		c := e.client()
		r := c.post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {password}, "next": {next}})
		wantRedirect(t, "sign in with next "+next, r, "/console/")
		r = c.get("/console/signin?next=" + url.QueryEscape(next))
		wantRedirect(t, "signed in, the sign-in page with next "+next, r, "/console/")
	}
	// A wrong password keeps next for the second try, unless it is unsafe.
	r := e.client().post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {"wrong"}, "next": {"/console/routes"}})
	if next, _ := r.doc.Find(`input[name="next"]`).Attr("value"); r.status != http.StatusUnauthorized || next != "/console/routes" {
		t.Errorf("wrong password: %d, next %q", r.status, next)
	}
	r = e.client().post("/console/signin", url.Values{"email": {"owner@acme.test"}, "password": {"wrong"}, "next": {"//evil.com"}})
	if r.doc.Find(`input[name="next"]`).Length() != 0 {
		t.Error("the sign-in form carries an unsafe next")
	}
}

func TestFaviconIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.client().get("/favicon.ico")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(r.body, "<svg") {
		t.Errorf("/favicon.ico: %d %q", r.status, r.header.Get("Content-Type"))
	}
	page := e.client().get("/console/signin")
	if icon, _ := page.doc.Find(`link[rel="icon"]`).Attr("href"); icon != static.Path("favicon.svg") {
		t.Errorf("pages link the icon %q", icon)
	}
}

// gzipped GETs path asking for gzip, and reports whether the answer was
// gzipped, with its decoded body.
func gzipped(t *testing.T, c *client, path string, header map[string]string) (bool, string) {
	t.Helper()
	req, err := http.NewRequest("GET", c.e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	body := io.Reader(resp.Body)
	zipped := resp.Header.Get("Content-Encoding") == "gzip"
	if zipped {
		if body, err = gzip.NewReader(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	if header["Accept"] == "text/event-stream" {
		b := make([]byte, 6)
		_, err = io.ReadFull(body, b)
		return zipped, string(b)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return zipped, string(b)
}

func TestConsoleIsCompressedButNotItsStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	for _, path := range []string{"/console/", "/console/dashboard", static.Path("console.css"), static.Path("htmx.min.js")} {
		if zipped, body := gzipped(t, owner, path, nil); !zipped || body == "" {
			t.Errorf("GET %s with Accept-Encoding gzip: gzipped %v, %d bytes", path, zipped, len(body))
		}
	}
	// An event stream is flushed event by event, uncompressed.
	for _, path := range []string{"/console/dashboard/live", "/console/usage/live"} {
		if zipped, start := gzipped(t, owner, path, map[string]string{"Accept": "text/event-stream"}); zipped || start != "retry:" {
			t.Errorf("GET %s with Accept-Encoding gzip: gzipped %v, starts %q", path, zipped, start)
		}
	}
}
