package observe_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// acme names every team "acme" and member n "mn@acme.test".
type acme struct{}

func (acme) TeamName(int64) string       { return "acme" }
func (acme) MemberEmail(id int64) string { return fmt.Sprintf("m%d@acme.test", id) }

func TestRequestLogSamplesButKeepsRefusalsAndErrors(t *testing.T) {
	t.Parallel()
	l := newLogged()
	rl := observe.NewRequestLog(l.log, 10, acme{})
	ok := proxy.Outcome{RequestID: "req_ok", Method: "POST", Status: 200, TeamID: 1, MemberID: 2, KeyID: "k", RoutePrefix: "/anthropic",
		Admitted: true, UpstreamStatus: 200, TTFB: 30 * time.Millisecond, Duration: 45 * time.Millisecond, Model: "claude-sonnet-4-5",
		CostMicros: 123, LedgerStatus: proxy.LedgerSettled, Usage: usage.Usage{InputTokens: 10, OutputTokens: 5}, BudgetRemaining: -1}
	for range 100 {
		rl.Finished(ok)
	}
	refused := proxy.Outcome{RequestID: "req_no", Method: "POST", Status: 429, Refusal: "rate", TeamID: 1, MemberID: 2, BudgetRemaining: -1}
	failed := ok
	failed.Status, failed.UpstreamStatus = 502, 0
	for range 7 {
		rl.Finished(refused)
		rl.Finished(failed)
	}
	counts := map[float64]int{}
	var sample map[string]any
	for _, line := range l.lines(t) {
		counts[line["status"].(float64)]++
		if line["status"] == 200.0 {
			sample = line
		}
	}
	if counts[200] != 10 || counts[429] != 7 || counts[502] != 7 {
		t.Fatalf("lines by status %v, want 10 of 100 successes and every refusal and error", counts)
	}
	tokens, _ := sample["tokens"].(map[string]any)
	if sample["msg"] != "request" || sample["team"] != "acme" || sample["member"] != "2" || sample["member_email"] != "m2@acme.test" || sample["route"] != "/anthropic" ||
		sample["duration_ms"] != 45.0 || sample["ttfb_ms"] != 30.0 || sample["cost_micros"] != 123.0 || sample["sampled"] != 10.0 ||
		tokens["input"] != 10.0 || tokens["output"] != 5.0 || sample["model"] != "claude-sonnet-4-5" {
		t.Errorf("request line %v", sample)
	}
}

func TestSecurityEventsNameTheControl(t *testing.T) {
	t.Parallel()
	l := newLogged()
	se := observe.NewSecurityEvents(l.log, acme{})
	for _, o := range []proxy.Outcome{
		{Refusal: "invalid_key", CredentialFault: "unknown_id", ClientAddr: "198.51.100.7"},
		{Refusal: "revoked", TeamID: 1, MemberID: 2, KeyID: "k1"},
		{Refusal: "expired", TeamID: 1, MemberID: 2, KeyID: "k1"},
		{Refusal: "cut_off", TeamID: 1, MemberID: 3},
		{Refusal: "unavailable", TeamID: 1, MemberID: 6},
		{Admitted: true, KeyInGrace: true, TeamID: 1, MemberID: 7},
		{Admitted: true, UpstreamError: "forbidden_address", TeamID: 1, MemberID: 8, RoutePrefix: "/meta"},
		{Refusal: "bad_body", TeamID: 1, MemberID: 9}, // not a security event
		{Admitted: true, TeamID: 1, MemberID: 9},      // nor this
		// nor a member held to their own limits: the limit working, not an attack
		{Refusal: "rate", TeamID: 1, MemberID: 4},
		{Refusal: "concurrency", TeamID: 1, MemberID: 4},
		{Refusal: "tpm", TeamID: 1, MemberID: 4},
		{Refusal: "budget", TeamID: 1, MemberID: 5},
	} {
		se.Finished(o)
	}
	var got []string
	for _, line := range l.lines(t) {
		got = append(got, line["control"].(string)+"/"+line["outcome"].(string))
		if line["msg"] != "security event" || line["level"] != "WARN" {
			t.Errorf("line %v", line)
		}
	}
	want := []string{"api_key/refused_invalid", "api_key/refused_revoked", "api_key/refused_expired", "member_cut_off/refused",
		"limiter/failed_closed", "key_rotation/used_in_grace", "upstream_address_guard/refused"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %s, want %s", i, got[i], want[i])
		}
	}
}
