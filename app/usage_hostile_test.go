package app_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
)

// usageUpstream answers each request with the status, content type and body the
// test put in its X-Hostile-* headers: an upstream that reports whatever usage it
// likes.
func usageUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body, _ := url.QueryUnescape(r.Header.Get("X-Hostile-Body"))
		status, err := strconv.Atoi(r.Header.Get("X-Hostile-Status"))
		if err != nil {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", r.Header.Get("X-Hostile-Type"))
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReportedUsageIsNotTruth (HOSTILE item 47): through a real gateway, an
// upstream reporting usage the request cannot have had gets the request charged
// its hold, marked implausible, with a security event; "usage" is read in the
// exact case the SDKs read; a provider error is released whatever usage it
// carries; a stream's final count of 0 output tokens is 0.
func TestReportedUsageIsNotTruth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hostile := usageUpstream(t)
	_, err := f.st.AddRoute(context.Background(), store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Preset: "anthropic",
		Prefix: "/hostile", UpstreamURL: hostile.URL})
	must(t, err)
	call := func(status int, contentType, body string) (response, proxy.LedgerEntry) {
		req := anthropicRequest(t, f.gw.URL+"/hostile", f.key, messagesBody) // max_tokens 32
		req.Header.Set("X-Hostile-Status", strconv.Itoa(status))
		req.Header.Set("X-Hostile-Type", contentType)
		req.Header.Set("X-Hostile-Body", url.QueryEscape(body))
		r := do(t, req)
		return r, ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	}
	msg := func(usage string) string { return `{"type":"message","content":[],"usage":` + usage + `}` }
	eventually(t, 10*time.Second, "hostile route loaded", func() bool {
		r := do(t, anthropicRequest(t, f.gw.URL+"/hostile", f.key, messagesBody))
		return r.status != http.StatusNotFound
	})

	// claude-sonnet-4-5 at $3 / $15 per million: 3 input + 32 output cost 489 µ$.
	implausible := []struct{ name, usage string }{
		{"output far past max_tokens", `{"input_tokens":3,"output_tokens":10000000}`},
		{"trillions of input tokens", `{"input_tokens":9000000000000,"output_tokens":32}`},
		{"2^63-1 output tokens", `{"input_tokens":3,"output_tokens":` + strconv.FormatInt(math.MaxInt64, 10) + `}`},
		{"a negative count", `{"input_tokens":-3,"output_tokens":32}`},
		{"no tokens at all", `{"input_tokens":0,"output_tokens":0}`},
	}
	var firstID string
	for _, c := range implausible {
		r, row := call(200, "application/json", msg(c.usage))
		if r.status != http.StatusOK {
			t.Fatalf("%s: the caller got %d, want the upstream's 200", c.name, r.status)
		}
		if row.Status != proxy.LedgerStatus("implausible") || row.CostMicros != row.HeldMicros || row.CostMicros <= 0 {
			t.Errorf("%s: ledger %s at %d µ$ (hold %d), want implausible at the hold", c.name, row.Status, row.CostMicros, row.HeldMicros)
		}
		if row.Usage.OutputTokens > 100_000_000 || row.Usage.InputTokens > 100_000_000 || row.Usage.InputTokens < 0 {
			t.Errorf("%s: ledger records usage %+v, past the ceiling", c.name, row.Usage)
		}
		if firstID == "" {
			firstID = row.RequestID
		}
	}
	logs := f.gw.Logs.String()
	if !strings.Contains(logs, `"control":"reported_usage"`) || !strings.Contains(logs, firstID) {
		t.Errorf("no reported_usage security event for %s in the logs", firstID)
	}

	// Both keys: the SDKs read "usage"; "Usage" is not charged, before or after it.
	for _, body := range []string{
		`{"type":"message","usage":{"input_tokens":3,"output_tokens":32},"Usage":{"input_tokens":3,"output_tokens":10000000}}`,
		`{"type":"message","Usage":{"input_tokens":3,"output_tokens":10000000},"usage":{"input_tokens":3,"output_tokens":32}}`,
	} {
		if _, row := call(200, "application/json", body); row.Status != proxy.LedgerSettled || row.CostMicros != 489 {
			t.Errorf("usage and Usage: %s at %d µ$, want settled at 489 from usage", row.Status, row.CostMicros)
		}
	}

	// Provider errors are not billed, whatever usage they carry.
	for _, status := range []int{400, 529} {
		body := `{"type":"error","error":{"type":"invalid_request_error","message":"no"},"usage":{"input_tokens":100000,"output_tokens":100000}}`
		r, row := call(status, "application/json", body)
		if r.status != status || row.Status != proxy.LedgerReleased || row.CostMicros != 0 {
			t.Errorf("%d carrying usage: caller got %d, ledger %s at %d µ$, want released at 0", status, r.status, row.Status, row.CostMicros)
		}
	}

	// A stream whose final message_delta counts 0 output tokens costs its input only,
	// not message_start's placeholder output token.
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":0}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if _, row := call(200, "text/event-stream", stream); row.Status != proxy.LedgerSettled || row.Usage.OutputTokens != 0 || row.CostMicros != 9 {
		t.Errorf("stream ending with 0 output tokens: %s, %d output, %d µ$; want settled, 0 output, 9 µ$", row.Status, row.Usage.OutputTokens, row.CostMicros)
	}
}

// TestAbsurdLedgerRowNeverBreaksRebuild (HOSTILE item 47): a ledger row claiming
// 2^63-1 micro-dollars (as the gateway wrote before it judged usage) must not fail
// the rebuild after Redis lost its counters, nor spend the team's budget: every
// member, the one with the row included, is still served.
func TestAbsurdLedgerRowNeverBreaksRebuild(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	bob, err := f.st.AddMember(ctx, store.ActorCLI, f.team.ID, "bob@acme.test", store.RoleMember)
	must(t, err)
	bobKey, err := f.st.IssueKey(ctx, store.ActorCLI, f.team.ID, bob.ID, "laptop")
	must(t, err)
	teamBudget := int64(100_000_000) // $100
	_, err = f.st.SetTeamLimits(ctx, store.ActorCLI, f.team.ID, store.Limits{RatePeriod: time.Second, Budget: &teamBudget, BudgetPeriod: "total"})
	must(t, err)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(10_000_000), BudgetPeriod: "total"})

	srv := redistest.StartServer(t)
	gw := apptest.Start(t, f.dbURL, map[string]string{"ANTHROPIC_API_KEY": anthropicSecret, "REDIS_URL": srv.URL()})
	eventually(t, 10*time.Second, "budgets reach the replica", func() bool {
		snap := gw.App.Snapshots.Current()
		m, _ := snap.Member(f.member.ID)
		team, _ := snap.Team(f.team.ID)
		return m.Limits.Budget != nil && team.Limits.Budget != nil
	})
	r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
	if r.status != http.StatusOK {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	honest := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	now := time.Now().UTC()
	must(t, f.st.WriteLedger(ctx, []proxy.LedgerEntry{{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: f.keyID,
		RequestID: "absurd-row", Model: "claude-sonnet-4-5", Status: proxy.LedgerSettled, HTTPStatus: 200,
		HeldMicros: 1000, CostMicros: math.MaxInt64, CreatedAt: now, SettledAt: now}}))

	srv.Kill()
	srv.Start() // empty: the next admission rebuilds the team from the ledger
	for _, m := range []struct {
		who, key string
		owner    bool // of the absurd row
	}{{"bob (innocent)", bobKey.Plaintext, false}, {"ada (the row's member)", f.key, true}} {
		r := do(t, anthropicRequest(t, gw.URL, m.key, messagesBody))
		if r.status != http.StatusOK {
			t.Errorf("%s after the rebuild: %d %s", m.who, r.status, r.body)
			continue
		}
		if m.owner {
			honest.CostMicros += ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)).CostMicros
		}
	}
	spent, err := f.st.SpendSince(ctx, f.team.ID, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("spend with an absurd row: %v", err)
	}
	if want := honest.CostMicros + 1000; spent[f.member.ID] != want {
		t.Fatalf("spend %d µ$, want the honest rows' %d plus the absurd row's hold", spent[f.member.ID], want)
	}
}
