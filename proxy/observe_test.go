package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/apikey"
)

// recorder is an Observer keeping every Outcome.
type recorder struct {
	mu       sync.Mutex
	outcomes []Outcome
}

func (r *recorder) Started(int64, int64) {}
func (r *recorder) Finished(o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
}

func (r *recorder) last() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[len(r.outcomes)-1]
}

// TestOutcomeTellsTheOperatorWhatTheCallerIsNotTold: every invalid key gets the
// same answer, but the Outcome says what was wrong; a key presented whole is
// attributed to its member even when refused; a key in its rotation grace and
// an upstream on a forbidden address are reported.
func TestOutcomeTellsTheOperatorWhatTheCallerIsNotTold(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	metadata, _ := url.Parse("http://169.254.169.254")
	live, revoked, rotated := apikey.Generate(), apikey.Generate(), apikey.Generate()
	snap := NewSnapshot([]Team{{ID: 1, Name: "acme"}},
		[]Key{{ID: live.ID, TeamID: 1, MemberID: 1, SecretHash: live.SecretHash},
			{ID: revoked.ID, TeamID: 1, MemberID: 1, SecretHash: revoked.SecretHash, Revoked: true},
			{ID: rotated.ID, TeamID: 1, MemberID: 1, SecretHash: rotated.SecretHash, ExpiresAt: time.Now().Add(time.Hour)}},
		[]Member{{ID: 1, TeamID: 1}},
		[]Route{{ID: 1, TeamID: 1, Prefix: "/p", Targets: []Target{NewTarget(u, "")}, Dialect: DialectGeneric},
			{ID: 2, TeamID: 1, Prefix: "/meta", Targets: []Target{NewTarget(metadata, "")}, Dialect: DialectGeneric}},
		nil, time.Now())
	rec := &recorder{}
	srv := httptest.NewServer(New(Options{Snapshots: staticSource{snap}, Getenv: func(string) string { return "" }, Observers: []Observer{rec},
		Transport: loopbackTransport()}))
	defer srv.Close()

	wrongSecret := "tg_" + live.ID + "_" + strings.Repeat("a", len(live.Plaintext)-len(live.ID)-4)
	unknown := apikey.Generate().Plaintext
	var bodies []string
	for key, fault := range map[string]string{"": "missing", "Bearer-less": "malformed", unknown: "unknown_id", wrongSecret: "wrong_secret"} {
		resp, body := get(t, srv.URL+"/p/x", key)
		o := rec.last()
		if resp.StatusCode != http.StatusUnauthorized || o.Refusal != "invalid_key" || o.CredentialFault != fault || o.TeamID != 0 ||
			o.ClientAddr != "127.0.0.1" {
			t.Errorf("key %q: %d, outcome refusal %q fault %q team %d addr %q; want 401, invalid_key, %s, no team, 127.0.0.1",
				key, resp.StatusCode, o.Refusal, o.CredentialFault, o.TeamID, o.ClientAddr, fault)
		}
		if key != "" { // without a key the error shape is guessed differently; that is no key's doing
			bodies = append(bodies, body)
		}
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("invalid keys answered differently: %q vs %q", b, bodies[0])
		}
	}
	get(t, srv.URL+"/p/x", revoked.Plaintext)
	if o := rec.last(); o.Refusal != "revoked" || o.TeamID != 1 || o.MemberID != 1 || o.KeyID != revoked.ID {
		t.Errorf("revoked key outcome %+v, want it attributed to its member", o)
	}
	get(t, srv.URL+"/p/x", rotated.Plaintext)
	if o := rec.last(); !o.Admitted || !o.KeyInGrace {
		t.Errorf("rotated key outcome admitted %v in grace %v", o.Admitted, o.KeyInGrace)
	}
	resp, _ := get(t, srv.URL+"/meta/latest", live.Plaintext)
	if o := rec.last(); resp.StatusCode != http.StatusBadGateway || o.UpstreamError != "forbidden_address" || o.Ctx == nil {
		t.Errorf("metadata upstream: %d, outcome upstream error %q", resp.StatusCode, o.UpstreamError)
	}
}
