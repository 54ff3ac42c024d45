package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// errorShape decodes either provider's error body and returns its message.
func errorShape(t *testing.T, dialect, body string) (typ, message string) {
	t.Helper()
	if dialect == "anthropic" {
		var e struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Message == "" {
			t.Fatalf("not an Anthropic error body: %s", body)
		}
		return e.Error.Type, e.Error.Message
	}
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	return e.Error.Type, e.Error.Message
}

// TestBadInputNeverReachesUpstream sends every kind of bad credential and path:
// each gets a clear provider-shaped error and nothing is forwarded.
func TestBadInputNeverReachesUpstream(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	other, err := f.st.CreateTeam(ctx, store.ActorCLI, "other")
	must(t, err)
	otherMember, err := f.st.AddMember(ctx, store.ActorCLI, other.ID, "bob@other.test", store.RoleMember)
	must(t, err)
	otherKey, err := f.st.IssueKey(ctx, store.ActorCLI, other.ID, otherMember.ID, "")
	must(t, err)
	revoked, err := f.st.IssueKey(ctx, store.ActorCLI, f.team.ID, f.member.ID, "old")
	must(t, err)
	_, err = f.st.RevokeKey(ctx, store.ActorCLI, f.team.ID, revoked.ID)
	must(t, err)
	disabledMember, err := f.st.AddMember(ctx, store.ActorCLI, f.team.ID, "eve@acme.test", store.RoleMember)
	must(t, err)
	disabledKey, err := f.st.IssueKey(ctx, store.ActorCLI, f.team.ID, disabledMember.ID, "")
	must(t, err)
	_, err = f.st.SetMemberStatus(ctx, store.ActorCLI, f.team.ID, disabledMember.ID, store.StatusDisabled)
	must(t, err)
	// The cut-off is the last change made; once it binds, the snapshot has them all.
	eventually(t, 10*time.Second, "snapshot sees the changes", func() bool {
		r := do(t, anthropicRequest(t, f.gw.URL, disabledKey.Plaintext, messagesBody))
		return r.status == http.StatusForbidden
	})

	invalidKey := "invalid or missing API key"
	wrongSecret := f.key[:len(f.key)-4] + "aaaa"
	cases := []struct {
		name    string
		path    string // raw request URI
		headers [][2]string
		status  int
		message string // substring of the error message
	}{
		{"no key", "/anthropic/v1/messages", nil, 401, invalidKey},
		{"garbage key", "/anthropic/v1/messages", [][2]string{{"x-api-key", "hello"}}, 401, invalidKey},
		{"empty bearer", "/openai/v1/chat/completions", [][2]string{{"Authorization", "Bearer "}}, 401, invalidKey},
		{"basic auth", "/openai/v1/chat/completions", [][2]string{{"Authorization", "Basic " + f.key}}, 401, invalidKey},
		{"two authorization headers", "/openai/v1/chat/completions", [][2]string{{"Authorization", "Bearer " + f.key}, {"Authorization", "Bearer " + f.key}}, 401, invalidKey},
		{"conflicting headers", "/anthropic/v1/messages", [][2]string{{"x-api-key", f.key}, {"Authorization", "Bearer " + otherKey.Plaintext}}, 401, invalidKey},
		{"key in query", "/anthropic/v1/messages?key=" + f.key, nil, 401, invalidKey},
		{"key in query and header", "/anthropic/v1/messages?api_key=" + f.key, [][2]string{{"x-api-key", f.key}}, 401, invalidKey},
		{"wrong secret", "/anthropic/v1/messages", [][2]string{{"x-api-key", wrongSecret}}, 401, invalidKey},
		{"unknown key id", "/anthropic/v1/messages", [][2]string{{"x-api-key", "tg_aaaaaaaaaaaaa" + f.key[16:]}}, 401, invalidKey},
		{"truncated key", "/anthropic/v1/messages", [][2]string{{"x-api-key", f.key[:40]}}, 401, invalidKey},
		{"revoked key", "/anthropic/v1/messages", [][2]string{{"x-api-key", revoked.Plaintext}}, 401, "revoked"},
		{"disabled member", "/anthropic/v1/messages", [][2]string{{"x-api-key", disabledKey.Plaintext}}, 403, "disabled"},
		{"other team's key on our route", "/anthropic/v1/messages", [][2]string{{"x-api-key", otherKey.Plaintext}}, 404, "no route"},
		{"unknown route", "/nope/v1/messages", [][2]string{{"x-api-key", f.key}}, 404, "no route"},
		{"prefix confusion", "/anthropicx/v1/messages", [][2]string{{"x-api-key", f.key}}, 404, "no route"},
		{"encoded slash in prefix", "/anthropic%2Fv1/messages", [][2]string{{"x-api-key", f.key}}, 400, "encoded /"},
		{"dot-dot into another route", "/anthropic/../openai/v1/chat/completions", [][2]string{{"x-api-key", f.key}}, 400, "segments"},
		{"encoded dot-dot", "/anthropic/%2e%2E/openai/v1/chat/completions", [][2]string{{"x-api-key", f.key}}, 400, "segments"},
		{"dot segment", "/anthropic/./v1/messages", [][2]string{{"x-api-key", f.key}}, 400, "segments"},
		{"h2c upgrade", "/anthropic/v1/messages", [][2]string{{"x-api-key", f.key}, {"Connection", "Upgrade"}, {"Upgrade", "h2c"}}, 400, "upgrade"},
		{"oversized headers", "/anthropic/v1/messages", [][2]string{{"x-api-key", f.key}, {"X-Padding", strings.Repeat("a", 70<<10)}}, 431, "headers exceed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.mock.Records())
			req, err := http.NewRequest(http.MethodPost, f.gw.URL, strings.NewReader(messagesBody))
			must(t, err)
			req.URL.Opaque = tc.path // sent exactly as written, no client-side cleaning
			for _, h := range tc.headers {
				req.Header.Add(h[0], h[1])
			}
			r := do(t, req)
			if r.status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, tc.status, r.body)
			}
			dialect := "openai"
			if req.Header.Get("x-api-key") != "" || strings.HasPrefix(tc.path, "/anthropic/v1") && tc.status != 401 {
				dialect = "anthropic"
			}
			_, msg := errorShape(t, dialect, r.body)
			if !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.message)) {
				t.Errorf("message %q does not say %q", msg, tc.message)
			}
			if got := len(f.mock.Records()); got != before {
				t.Errorf("request reached the upstream")
			}
		})
	}
	t.Run("same body for every invalid-key variant", func(t *testing.T) {
		a := do(t, anthropicRequest(t, f.gw.URL, "nonsense", messagesBody))
		b := do(t, anthropicRequest(t, f.gw.URL, wrongSecret, messagesBody))
		if a.body != b.body {
			t.Errorf("bodies differ:\n%s\n%s", a.body, b.body)
		}
	})
}

// TestPathsForwardedExactly checks encoded characters reach the upstream as the
// caller wrote them, below the route's prefix.
func TestPathsForwardedExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// An encoded "/" in the path is refused (TestEncodedSeparatorsRefused); in the query it is data.
	for _, path := range []string{"/v1/models/a%20b", "/v1/models/a%3Ab", "/v1/models?x=1&y=%2F"} {
		req, err := http.NewRequest(http.MethodGet, f.gw.URL, nil)
		must(t, err)
		req.URL.Opaque = "/anthropic" + path
		req.Header.Set("x-api-key", f.key)
		do(t, req)
		recs := f.mock.Records()
		got := recs[len(recs)-1]
		// What went over the wire: Go leaves RawPath empty when it equals the default encoding.
		sent := (&url.URL{Path: got.Path, RawPath: got.RawPath}).EscapedPath()
		if got.RawQuery != "" {
			sent += "?" + got.RawQuery
		}
		if sent != path {
			t.Errorf("upstream saw %q, want %q", sent, path)
		}
	}
}

// TestRotationGrace: inside the grace window the old key works and says it is
// deprecated; after it, it is refused; the new key works throughout.
func TestRotationGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	newKey, err := f.st.RotateKey(ctx, store.ActorCLI, f.team.ID, f.keyID, 2*time.Second)
	must(t, err)
	eventually(t, 10*time.Second, "new key accepted", func() bool {
		return do(t, anthropicRequest(t, f.gw.URL, newKey.Plaintext, messagesBody)).status == http.StatusOK
	})
	old := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
	if old.status != http.StatusOK || old.header.Get("Deprecation") != "true" || old.header.Get("Sunset") == "" {
		t.Fatalf("old key in grace: status %d, Deprecation %q, Sunset %q", old.status, old.header.Get("Deprecation"), old.header.Get("Sunset"))
	}
	if fresh := do(t, anthropicRequest(t, f.gw.URL, newKey.Plaintext, messagesBody)); fresh.header.Get("Deprecation") != "" {
		t.Errorf("new key marked deprecated")
	}
	eventually(t, 10*time.Second, "old key refused after grace", func() bool {
		r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
		return r.status == http.StatusUnauthorized && strings.Contains(r.body, "grace period has ended")
	})
	if r := do(t, anthropicRequest(t, f.gw.URL, newKey.Plaintext, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("new key after grace: %d", r.status)
	}

	// Grace zero: the old key stops at once.
	newest, err := f.st.RotateKey(ctx, store.ActorCLI, f.team.ID, newKey.ID, 0)
	must(t, err)
	eventually(t, 10*time.Second, "rotated key with no grace refused", func() bool {
		return do(t, anthropicRequest(t, f.gw.URL, newKey.Plaintext, messagesBody)).status == http.StatusUnauthorized
	})
	if r := do(t, anthropicRequest(t, f.gw.URL, newest.Plaintext, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("newest key: %d", r.status)
	}
}

// TestRevokeBindsOnSecondReplica revokes through the store while two replicas
// serve the key, and measures how long until the second refuses it. The replicas
// poll only every 10 minutes, so the change travels by LISTEN/NOTIFY.
func TestRevokeBindsOnSecondReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := f.replica(t)
	for _, gw := range []string{f.gw.URL, second.URL} {
		if r := do(t, anthropicRequest(t, gw, f.key, messagesBody)); r.status != http.StatusOK {
			t.Fatalf("warm-up on %s: %d %s", gw, r.status, r.body)
		}
	}
	_, err := f.st.RevokeKey(context.Background(), store.ActorCLI, f.team.ID, f.keyID)
	must(t, err)
	took := eventually(t, 5*time.Second, "revocation on the second replica", func() bool {
		return do(t, anthropicRequest(t, second.URL, f.key, messagesBody)).status == http.StatusUnauthorized
	})
	t.Logf("revoke committed -> refused on a second replica in %s", took)

	// Cut-off binds the same way.
	fresh, err := f.st.IssueKey(context.Background(), store.ActorCLI, f.team.ID, f.member.ID, "")
	must(t, err)
	eventually(t, 5*time.Second, "new key on the second replica", func() bool {
		return do(t, anthropicRequest(t, second.URL, fresh.Plaintext, messagesBody)).status == http.StatusOK
	})
	_, err = f.st.SetMemberStatus(context.Background(), store.ActorCLI, f.team.ID, f.member.ID, store.StatusDisabled)
	must(t, err)
	took = eventually(t, 5*time.Second, "cut-off on the second replica", func() bool {
		return do(t, anthropicRequest(t, second.URL, fresh.Plaintext, messagesBody)).status == http.StatusForbidden
	})
	t.Logf("cut-off committed -> refused on a second replica in %s", took)
}
