package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestMemberAtOwnLimitLogsOneLinePerRequest: 70 requests of which 50 pass
// the member's own rate limit write 70 request lines naming the member by
// email and no security event (the limit working is not an attack), while a
// burst of bad keys still makes one.
func TestMemberAtOwnLimitLogsOneLinePerRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.st.SetMemberLimits(t.Context(), store.ActorCLI, f.team.ID, f.member.ID,
		store.Limits{RateAlgorithm: "token_bucket", RateLimit: 20, RatePeriod: time.Hour, RateBurst: 20})
	must(t, err)
	must(t, f.gw.App.Snapshots.Reload(t.Context()))

	statuses := map[int]int{}
	for range 70 {
		statuses[do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)).status]++
	}
	if statuses[http.StatusOK] != 20 || statuses[http.StatusTooManyRequests] != 50 {
		t.Fatalf("statuses %v, want 20 admitted and 50 refused by the rate limit", statuses)
	}
	f.gw.Stop()
	var requests, perRequest, events int
	for _, line := range strings.Split(strings.TrimSpace(f.gw.Logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		if rec["request_id"] != nil {
			perRequest++
		}
		switch rec["msg"] {
		case "request":
			requests++
			if rec["member_email"] != "ada@acme.test" {
				t.Errorf("request line without the member's email: %s", line)
			}
		case "security event":
			events++
			t.Errorf("security event for a member at their own limit: %s", line)
		}
	}
	if requests != 70 || perRequest != 70 {
		t.Errorf("%d request lines and %d lines naming a request for 70 requests, want one each:\n%s", requests, perRequest, f.gw.Logs.String())
	}
	if events != 0 {
		t.Errorf("%d security events, want none", events)
	}

	// Bad keys are still reported, folded.
	gw := f.replica(t)
	bad := "tg_aaaaaaaaaaaaa_" + strings.Repeat("b", 52)
	for range 5 {
		if r := do(t, anthropicRequest(t, gw.URL, bad, messagesBody)); r.status != http.StatusUnauthorized {
			t.Fatalf("bad key: %d %s", r.status, r.body)
		}
	}
	gw.Stop()
	// The first at once, the rest in the burst's summary line.
	if n := strings.Count(gw.Logs.String(), `"msg":"security event"`); n < 1 || n > 2 {
		t.Errorf("%d security event lines for a burst of 5 bad keys, want the first and a summary:\n%s", n, gw.Logs.String())
	}
}
