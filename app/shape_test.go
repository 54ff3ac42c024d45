package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/store"
)

// recordingUpstream serves 200 JSON and keeps the request URI of everything
// it receives.
type recordingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	uris []string
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.uris = append(u.uris, r.RequestURI)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *recordingUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.uris...)
}

// sendExact sends a request whose request-target is written exactly as given.
func sendExact(t *testing.T, gwURL, target, key string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gwURL, strings.NewReader(messagesBody))
	must(t, err)
	req.URL.Opaque, req.URL.RawQuery = target, ""
	if p, q, ok := strings.Cut(target, "?"); ok {
		req.URL.Opaque, req.URL.RawQuery = p, q
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	return do(t, req)
}

// TestEncodedSeparatorsRefused: on a route whose upstream has a base path, no
// path below the prefix that decodes to a dot segment or holds an encoded "/"
// or "\" reaches the upstream, which would resolve it outside /base; ordinary
// encoded characters still go through exactly as sent.
func TestEncodedSeparatorsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	up := newRecordingUpstream(t)
	_, err := f.st.AddRoute(context.Background(), store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Prefix: "/based",
		UpstreamURL: up.URL + "/base", Dialect: "anthropic", CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"})
	must(t, err)
	eventually(t, 10*time.Second, "route /based loaded", func() bool {
		return sendExact(t, f.gw.URL, "/based/v1/messages", f.key).status == http.StatusOK
	})

	for _, path := range []string{
		"/based/..%2f..%2fadmin%2fsecret",
		"/based/..%2F..%2Fadmin",
		"/based/%2e%2e%2fadmin",
		"/based/%2E%2e%2Fadmin",
		"/based/..%5cadmin",
		"/based/..%5C..%5Cadmin",
		"/based/v1/a%2fb",
		"/based/v1/a%5Cb",
		`/based/v1/a\b`,
		"/based/%252e%252e%252fadmin",     // encoded twice
		"/based/%25252e%25252e/admin",     // three times
		"/based/%2525252e%2525252e/admin", // four: past what is followed
		"/based/..;/admin",                // read as ".." by servlet containers
		"/based/%2e%2e;x/admin",
		"/based/v1/%2e/messages",
	} {
		before := len(up.seen())
		r := sendExact(t, f.gw.URL, path, f.key)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; body %s", path, r.status, r.body)
			continue
		}
		if _, msg := errorShape(t, "anthropic", r.body); !strings.Contains(msg, "path") {
			t.Errorf("%s: message %q does not name the path", path, msg)
		}
		if got := up.seen()[before:]; len(got) != 0 {
			t.Errorf("%s reached the upstream as %q", path, got)
		}
	}

	// Forwarded exactly, below the base path.
	for _, path := range []string{"/v1/models/a%20b", "/v1/files/report.v2.json", "/v1/files/100%25", "/v1/files/..x", "/v1/models?x=%2F"} {
		before := len(up.seen())
		if r := sendExact(t, f.gw.URL, "/based"+path, f.key); r.status != http.StatusOK {
			t.Errorf("%s: status %d, want 200; body %s", path, r.status, r.body)
			continue
		}
		if got := up.seen()[before:]; len(got) != 1 || got[0] != "/base"+path {
			t.Errorf("%s: upstream saw %q, want %q", path, got, "/base"+path)
		}
	}
}

// keyInQueryVariants is the member key in the query string in the encodings
// a client or an attacker could use; every one must be refused unforwarded.
func keyInQueryVariants(key string) map[string]string {
	rest := strings.TrimPrefix(key, "tg_")
	var every strings.Builder // each byte percent-encoded
	for i := range len(key) {
		every.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[key[i]>>4])+string("0123456789abcdef"[key[i]&15])))
	}
	return map[string]string{
		"raw":                 "key=" + key,
		"encoded underscore":  "key=tg%5F" + rest,
		"lower-case escape":   "key=tg%5f" + rest,
		"double-encoded":      "key=tg%255F" + rest,
		"every byte encoded":  "key=" + every.String(),
		"as a parameter name": "beta=true&" + "tg%5F" + rest + "=1",
		"upper-cased":         "key=" + strings.ToUpper(key),
		"after a bad escape":  "a=%zz&key=tg%5F" + rest,
		"plus and semicolon":  "x=a+b;api_key=tg%5F" + rest,
	}
}

// TestKeyInQueryNeverForwarded: with a valid header key, a member key in the
// query string in any encoding is refused (401) and never reaches the
// upstream, the logs or a trace span.
func TestKeyInQueryNeverForwarded(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	key := o.keys["ada@acme.test"]
	_, secret, _ := strings.Cut(strings.TrimPrefix(key, "tg_"), "_")
	up := newRecordingUpstream(t)
	_, err := o.st.AddRoute(context.Background(), store.ActorCLI, store.RouteSpec{TeamID: o.team.ID, Prefix: "/rec",
		UpstreamURL: up.URL, Dialect: "anthropic", CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"})
	must(t, err)
	eventually(t, 10*time.Second, "route /rec loaded", func() bool {
		return sendExact(t, o.gw.URL, "/rec/v1/messages?beta=true", key).status == http.StatusOK
	})

	serverSpans := func() int {
		n := 0
		for _, s := range o.gw.Spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				n++
			}
		}
		return n
	}
	before := serverSpans()
	variants := keyInQueryVariants(key)
	for name, query := range variants {
		r := sendExact(t, o.gw.URL, "/rec/v1/messages?"+query, key)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401; body %s", name, r.status, r.body)
			continue
		}
		if _, msg := errorShape(t, "anthropic", r.body); !strings.Contains(msg, "x-api-key") {
			t.Errorf("%s: message %q does not say where the key belongs", name, msg)
		}
	}
	if got := up.seen(); len(got) != 1 {
		t.Errorf("the upstream saw %q, want only the readiness probe", got)
	}
	// A server span ends just after its response; wait for the refusals' ones.
	eventually(t, 5*time.Second, "the refusals' spans ended", func() bool { return serverSpans() >= before+len(variants) })
	spans := spanText(o.gw.Spans.Ended())
	for what, out := range map[string]string{"upstream": strings.Join(up.seen(), "\n"), "logs": o.gw.Logs.String(), "spans": spans} {
		if strings.Contains(strings.ToLower(out), secret) {
			t.Errorf("the key's secret appears in the %s", what)
		}
	}
}
