package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/apikey"
)

// BenchmarkGatewayHappyPath is one caller's small request through the whole
// gateway to a healthy upstream over loopback: key check, route, in-process
// admission, target choice, breaker and bounds, proxying. Comparing it with
// the same benchmark at an earlier commit shows what a change costs on the
// path every request takes (README, Measured).
func BenchmarkGatewayHappyPath(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"msg_1","type":"message","content":[]}`))
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	k := apikey.Generate()
	credentialed := benchRoute(u)
	credentialed.ID, credentialed.Prefix = 2, "/c"
	credentialed.CredentialHeader, credentialed.CredentialFormat = "x-api-key", "{}"
	snap := NewSnapshot([]Team{{ID: 1}}, []Key{{ID: k.ID, TeamID: 1, MemberID: 1, SecretHash: k.SecretHash}},
		[]Member{{ID: 1, TeamID: 1}}, []Route{benchRoute(u), credentialed}, nil, time.Now())
	srv := httptest.NewServer(New(Options{Snapshots: staticSource{snap}, Getenv: func(string) string { return "sk-bench-provider-credential" },
		Transport: loopbackTransport()}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	// The credentialed route also scrubs the answer for the injected key.
	for _, c := range []struct{ name, method, prefix string }{
		{"GET", http.MethodGet, "/p"}, {"POST", http.MethodPost, "/p"}, {"POST-credentialed", http.MethodPost, "/c"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(c.method, srv.URL+c.prefix+"/v1/messages", strings.NewReader(`{"input":"hello"}`))
				req.Header.Set("x-api-key", k.Plaintext)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

func benchRoute(u *url.URL) Route {
	return Route{ID: 1, TeamID: 1, Prefix: "/p", Targets: []Target{NewTarget(u, "")}, Dialect: DialectGeneric, MaxAttempts: 2}
}

// BenchmarkPickAndRecord is the resilience machinery's own cost per attempt:
// choosing one of two targets and recording its outcome.
func BenchmarkPickAndRecord(b *testing.B) {
	u1, _ := url.Parse("http://127.0.0.1:1")
	u2, _ := url.Parse("http://127.0.0.1:2")
	route := Route{Targets: []Target{NewTarget(u1, ""), NewTarget(u2, "")}, MaxAttempts: 2}
	ups := newUpstreams(ResilienceOptions{}, time.Now, nil)
	usable := func(*Target) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		i, h, p, err := ups.pick(&route, 0, usable)
		if err != nil {
			b.Fatal(err)
		}
		ups.record(&route.Targets[i], h, p, attemptOK)
	}
}
