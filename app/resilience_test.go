package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/faulty"
)

// TestProviderOutageIsShedFastAndChargesNothing: a paid route whose provider
// answers 503 trips its breaker; from then on callers get a fast,
// Anthropic-shaped 503 with Retry-After, the provider is not called, and no
// request of the outage leaves a hold or a charge.
func TestProviderOutageIsShedFastAndChargesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	down := faulty.Status(t, http.StatusServiceUnavailable)
	_, err := f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Preset: "anthropic", Prefix: "/down", UpstreamURL: down.URL})
	must(t, err)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "total"})
	eventually(t, 10*time.Second, "route and budget reach the replica", func() bool {
		m, _ := f.gw.App.Snapshots.Current().Member(f.member.ID)
		_, _, ok := f.gw.App.Snapshots.Current().MatchRoute(f.team.ID, "/down/v1/messages")
		return ok && m.Limits.Budget != nil
	})
	call := func() response {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.URL.Path = "/down/v1/messages"
		return do(t, req)
	}
	// The default breaker needs 20 outcomes in its window at 50% failures.
	for i := range 20 {
		if r := call(); r.status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d %s, want the provider's 503", i, r.status, r.body)
		}
	}
	start := time.Now()
	for range 30 {
		r := call()
		typ, msg := errorShape(t, "anthropic", r.body)
		if r.status != http.StatusServiceUnavailable || typ != "overloaded_error" || r.header.Get("Retry-After") == "" ||
			!strings.Contains(msg, "not sending it traffic") {
			t.Fatalf("breaker open: %d %s %q Retry-After %q", r.status, typ, msg, r.header.Get("Retry-After"))
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("30 refusals with the breaker open took %s", took)
	}
	if n := down.Requests(); n != 20 {
		t.Fatalf("the provider saw %d requests, want 20: the open breaker must not call it", n)
	}
	// A request to the healthy route still goes through, charged from the full budget.
	if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("healthy route: %d %s", r.status, r.body)
	}
	time.Sleep(300 * time.Millisecond) // past a ledger flush
	rows, err := f.st.Ledger(ctx, f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	charged := 0
	for _, row := range rows {
		if row.Status != proxy.LedgerReleased || row.CostMicros != 0 {
			charged++
		}
	}
	if len(rows) != 51 || charged != 1 {
		t.Errorf("%d ledger rows, %d charged; want 51 rows with only the healthy request charged", len(rows), charged)
	}
}

// TestSlowlorisIsCutWhileOthersAreServed: a client sending its headers a byte
// at a time is disconnected after READ_HEADER_TIMEOUT; meanwhile a normal
// caller is served.
func TestSlowlorisIsCutWhileOthersAreServed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gw := f.replicaWith(t, map[string]string{"READ_HEADER_TIMEOUT": "500ms"})
	head := "POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + f.key + "\r\nContent-Length: 2\r\n\r\n{}"
	done := make(chan time.Duration, 1)
	go func() {
		took, _ := faulty.SlowClient(t, gw.URL, []byte(head), 50*time.Millisecond, 10*time.Second)
		done <- took
	}()
	time.Sleep(100 * time.Millisecond)
	if r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("a normal caller beside the slow one: %d %s", r.status, r.body)
	}
	if took := <-done; took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("slow-header client closed after %s, want about the 500ms READ_HEADER_TIMEOUT", took)
	}
}
