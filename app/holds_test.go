package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// agentBody is an agent CLI's request: max_tokens in the tens of thousands.
const agentBody = `{"model":"claude-sonnet-4-5","max_tokens":32000,"messages":[{"role":"user","content":"Hello there"}]}`

// inTier puts the fixture's member in a tier with a total budget and an
// over-budget choice, and waits until the replicas have it.
func inTier(t *testing.T, f *fixture, budget int64, over store.OverBudget) {
	t.Helper()
	ctx := context.Background()
	tier := store.NewTier("agents")
	tier.Limits.Budget, tier.Limits.BudgetPeriod, tier.OverBudget = &budget, "total", over
	_, err := f.st.CreateTier(ctx, store.ActorCLI, f.team.ID, tier)
	must(t, err)
	_, err = f.st.AssignTier(ctx, store.ActorCLI, f.team.ID, f.member.ID, "agents")
	must(t, err)
	waitForBudget(t, f.gw, f)
}

// waitForSpend waits until the member's settled spend reaches micros: a settle
// lands just after its response.
func waitForSpend(t *testing.T, f *fixture, micros int64) {
	t.Helper()
	eventually(t, 10*time.Second, "the settle", func() bool {
		rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 100)
		must(t, err)
		var spent int64
		for _, r := range rows {
			if r.Status == proxy.LedgerSettled {
				spent += r.CostMicros
			}
		}
		return spent >= micros
	})
}

// TestFitLowersMaxTokens: in a tier that fits, a request whose max_tokens 32000
// ($0.48 at claude-sonnet-4-5's $15 per million output) does not fit a $0.10
// budget is forwarded with max_tokens lowered to what the budget covers, said in
// X-Tollgate-Max-Tokens; the body stays valid JSON of the length sent, with
// nothing else changed; the ledger holds the lowered worst case and charges the
// exact cost.
func TestFitLowersMaxTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inTier(t, f, 100_000, store.OverBudgetFit)
	r := do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody))
	if r.status != http.StatusOK {
		t.Fatalf("fitted request: %d %s", r.status, r.body)
	}
	var lowered int64
	if _, err := fmt.Sscanf(r.header.Get(proxy.MaxTokensHeader), "lowered from 32000 to %d to fit the budget left", &lowered); err != nil {
		t.Fatalf("%s: %q: %v", proxy.MaxTokensHeader, r.header.Get(proxy.MaxTokensHeader), err)
	}
	// 100000 µ$ at 15 µ$ an output token, less the input's hold: a little under 6666.
	if lowered < 6000 || lowered >= 6667 {
		t.Fatalf("lowered to %d, want what $0.10 covers at $15 per million (about 6600)", lowered)
	}
	rec := f.mock.Records()[len(f.mock.Records())-1]
	want := strings.Replace(agentBody, `"max_tokens":32000`, fmt.Sprintf(`"max_tokens":%d`, lowered), 1)
	if string(rec.Body) != want || rec.BodyBytes != len(want) || !json.Valid(rec.Body) {
		t.Fatalf("upstream got %d bytes %s, want %s", rec.BodyBytes, rec.Body, want)
	}
	row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	if row.HeldMicros > 100_000 || row.HeldMicros < 100_000-15 || row.Status != proxy.LedgerSettled || row.CostMicros != 3*3+100*15 {
		t.Fatalf("ledger %+v: want the whole $0.10 held (within one token) and 3 in / 100 out = 1509 charged", row)
	}
	// The cost came back: the next fits into the $0.098491 left, and without a tier
	// that fits the same request is refused.
	r = do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody))
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get(proxy.MaxTokensHeader), "lowered from 32000 to ") {
		t.Fatalf("second: %d %q", r.status, r.header.Get(proxy.MaxTokensHeader))
	}
	// A request that fits whole is forwarded as sent, without the header.
	r = do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
	if r.status != http.StatusOK || r.header.Get(proxy.MaxTokensHeader) != "" {
		t.Fatalf("small request: %d %q", r.status, r.header.Get(proxy.MaxTokensHeader))
	}
	if rec := f.mock.Records()[len(f.mock.Records())-1]; string(rec.Body) != messagesBody {
		t.Fatalf("small request forwarded as %s", rec.Body)
	}
}

// TestFitBelowTheFloorRefuses: with less left than max_tokens 1024 would hold
// ($0.015564), a fitting tier refuses, and says the floor and what is left.
func TestFitBelowTheFloorRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inTier(t, f, 17_000, store.OverBudgetFit)
	if r := do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody)); r.status != http.StatusOK {
		t.Fatalf("first, fitted: %d %s", r.status, r.body)
	}
	waitForSpend(t, f, 1509)
	r := do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody)) // $0.015491 left
	_, msg := errorShape(t, "anthropic", r.body)
	if r.status != http.StatusPaymentRequired || !strings.Contains(msg, "even lowered to max_tokens 1024, this request would hold up to $0.015564") ||
		!strings.Contains(msg, "$0.015491 of your budget of $0.017000 is left") {
		t.Fatalf("%d %q", r.status, msg)
	}
}

// TestRefuseExplainsTheHold: in a tier that refuses (the default), the 402 says
// what the request would hold and why, and how much of which budget is left.
func TestRefuseExplainsTheHold(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inTier(t, f, 481_000, store.OverBudgetRefuse) // one $0.480204 hold fits; after it settles, $0.479491 is left
	if r := do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody)); r.status != http.StatusOK || r.header.Get(proxy.MaxTokensHeader) != "" {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	waitForSpend(t, f, 1509)
	records := len(f.mock.Records())
	r := do(t, anthropicRequest(t, f.gw.URL, f.key, agentBody))
	_, msg := errorShape(t, "anthropic", r.body)
	for _, want := range []string{"this request would hold up to $0.480204 (max_tokens 32000 at claude-sonnet-4-5 prices)",
		"$0.479491 of your budget of $0.481000 is left"} {
		if r.status != http.StatusPaymentRequired || !strings.Contains(msg, want) {
			t.Fatalf("%d %q, want it to say %q", r.status, msg, want)
		}
	}
	if len(f.mock.Records()) != records {
		t.Fatal("a refused request reached the upstream")
	}
}

// TestFitConcurrentAcrossReplicas: 30 fitted requests at once over two replicas
// against a $0.10 budget: what is held at any time and what is spent in the
// end never pass it.
func TestFitConcurrentAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := f.replica(t)
	inTier(t, f, 100_000, store.OverBudgetFit)
	waitForBudget(t, second, f)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := []string{}
	for i := range 30 {
		gw := f.gw
		if i%2 == 1 {
			gw = second
		}
		wg.Go(func() {
			r := do(t, anthropicRequest(t, gw.URL, f.key, agentBody))
			switch r.status {
			case http.StatusOK:
				mu.Lock()
				ids = append(ids, r.header.Get(proxy.RequestIDHeader))
				mu.Unlock()
			case http.StatusPaymentRequired:
			default:
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if len(ids) == 0 {
		t.Fatal("no request was admitted")
	}
	var spent int64
	for _, id := range ids {
		row := ledgerRow(t, f, id)
		if row.HeldMicros > 100_000 {
			t.Fatalf("a request held %d, more than the budget", row.HeldMicros)
		}
		spent += row.CostMicros
	}
	if spent > 100_000 {
		t.Fatalf("%d requests spent %d µ$ of a 100000 budget", len(ids), spent)
	}
}
