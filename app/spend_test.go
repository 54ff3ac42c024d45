package app_test

import (
	"github.com/redis/go-redis/v9"

	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
)

func dollarsPtr(micros int64) *int64 { return &micros }

// ledgerRow waits until the request's row is final in Postgres.
func ledgerRow(t *testing.T, f *fixture, requestID string) proxy.LedgerEntry {
	t.Helper()
	var row proxy.LedgerEntry
	eventually(t, 10*time.Second, "ledger row for "+requestID, func() bool {
		rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 10000)
		must(t, err)
		for _, r := range rows {
			if r.RequestID == requestID && r.Status != proxy.LedgerHeld {
				row = r
				return true
			}
		}
		return false
	})
	return row
}

// TestSettleExactCost: the ledger row of a plain and a streamed call from each
// provider carries the usage the provider reported and its exact price; an
// OpenAI stream that did not ask for usage gets include_usage added.
func TestSettleExactCost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	openaiStream := `{"model":"gpt-4o-mini","stream":true,"max_completion_tokens":9,"messages":[{"role":"user","content":"hi there"}]}`
	calls := []struct {
		name string
		req  *http.Request
	}{
		{"anthropic json", anthropicRequest(t, f.gw.URL, f.key, messagesBody)},
		{"anthropic stream", anthropicRequest(t, f.gw.URL, f.key, strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":32,"stream":true`, 1))},
		{"openai stream without include_usage", openaiRequest(t, f, openaiStream)},
	}
	for _, c := range calls {
		r := do(t, c.req)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
		rec := f.mock.Records()[len(f.mock.Records())-1]
		if row.Status != proxy.LedgerSettled || row.Usage.OutputTokens != rec.Usage.OutputTokens ||
			row.Usage.InputTokens+row.Usage.CacheReadTokens != rec.Usage.InputTokens || row.CostMicros <= 0 || row.HeldMicros < row.CostMicros {
			t.Fatalf("%s: ledger %+v vs provider usage %+v", c.name, row, rec.Usage)
		}
	}
	// claude-sonnet-4-5 at $3 / $15 per million: 3 input + 32 output tokens cost
	// ceil(3×3 + 32×15) = 489 micro-dollars.
	first := ledgerRow(t, f, do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)).header.Get(proxy.RequestIDHeader))
	if first.Usage.InputTokens != 3 || first.Usage.OutputTokens != 32 || first.CostMicros != 489 {
		t.Fatalf("hand-checked cost: usage %+v cost %d, want 3 in / 32 out = 489", first.Usage, first.CostMicros)
	}
}

func openaiRequest(t *testing.T, f *fixture, body string) *http.Request {
	return chatRequest(t, f.gw.URL, f.key, body)
}

// TestBudgetRefusal: once the budget is spent the member gets 402 in the
// provider's shape saying which budget and when it resets; every response
// carries the remaining budget; refusals reach nothing and hold nothing.
func TestBudgetRefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(3000), BudgetPeriod: "daily"})
	waitForBudget(t, f.gw, f)
	// max_tokens 32 holds under $0.001; each call settles at 489 micros.
	var refused response
	admitted := 0
	for range 20 {
		r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
		if r.status == http.StatusPaymentRequired {
			refused = r
			break
		}
		if r.status != http.StatusOK || r.header.Get("X-Budget-Remaining-Micros") == "" {
			t.Fatalf("admitted call: %d, budget header %q", r.status, r.header.Get("X-Budget-Remaining-Micros"))
		}
		admitted++
	}
	if refused.status == 0 || admitted < 4 {
		t.Fatalf("admitted %d calls under a $0.003 budget before a 402", admitted)
	}
	typ, msg := errorShape(t, "anthropic", refused.body)
	if typ != "billing_error" || !strings.Contains(msg, "budget") || !strings.Contains(msg, "resets at") {
		t.Fatalf("402: %s %q", typ, msg)
	}
	// A daily budget comes back at the next midnight UTC: Retry-After says when.
	untilMidnight := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour))
	if after, err := strconv.Atoi(refused.header.Get("Retry-After")); err != nil ||
		time.Duration(after)*time.Second < untilMidnight-time.Minute || time.Duration(after)*time.Second > untilMidnight+time.Minute {
		t.Fatalf("402 Retry-After %q, want about %s (until midnight UTC)", refused.header.Get("Retry-After"), untilMidnight.Round(time.Second))
	}
	// Spent is what the ledger says: never more than the budget.
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	var spent int64
	for _, r := range rows {
		spent += r.CostMicros
	}
	if spent > 3000 {
		t.Fatalf("spent %d micro-dollars against a 3000 budget", spent)
	}
	before := len(f.mock.Records())
	for range 5 {
		if r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)); r.status != http.StatusPaymentRequired {
			t.Fatalf("after the budget: %d", r.status)
		}
	}
	if len(f.mock.Records()) != before {
		t.Fatal("a refused request reached the upstream")
	}
}

// TestBadBodiesRefusedWithoutHolds: every malformed or unpriceable paid request
// is refused clearly, before admission, and leaves nothing held.
func TestBadBodiesRefusedWithoutHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "total"})
	waitForBudget(t, f.gw, f)
	bomb := gzipBytes(t, bytes.Repeat([]byte("a"), 64<<20))
	cases := []struct {
		name, body, encoding string
		raw                  []byte
		status               int
		says                 string
	}{
		{"unknown model", `{"model":"claude-imaginary","max_tokens":5,"messages":[]}`, "", nil, 400, "no price"},
		{"max_tokens a string", `{"model":"claude-sonnet-4-5","max_tokens":"5","messages":[]}`, "", nil, 400, "max_tokens"},
		{"max_tokens negative", `{"model":"claude-sonnet-4-5","max_tokens":-5,"messages":[]}`, "", nil, 400, "max_tokens"},
		{"max_tokens a float", `{"model":"claude-sonnet-4-5","max_tokens":5.5,"messages":[]}`, "", nil, 400, "max_tokens"},
		{"max_tokens 2^63", `{"model":"claude-sonnet-4-5","max_tokens":9223372036854775808,"messages":[]}`, "", nil, 400, "max_tokens"},
		{"max_tokens above the model", `{"model":"claude-sonnet-4-5","max_tokens":100000000,"messages":[]}`, "", nil, 400, "max_tokens"},
		{"duplicate model", `{"model":"claude-haiku-4-5","model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`, "", nil, 400, "model"},
		{"base_url in body", `{"model":"claude-sonnet-4-5","max_tokens":5,"base_url":"http://evil","messages":[]}`, "", nil, 400, "base_url"},
		{"not json", `{"model":`, "", nil, 400, ""},
		{"gzip bomb", "", "gzip", bomb, 413, ""},
		{"unknown encoding", messagesBody, "compress", nil, 415, ""},
	}
	records := len(f.mock.Records())
	for _, c := range cases {
		body := c.raw
		if body == nil {
			body = []byte(c.body)
		}
		req := anthropicRequest(t, f.gw.URL, f.key, "")
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if c.encoding != "" {
			req.Header.Set("Content-Encoding", c.encoding)
		}
		r := do(t, req)
		_, msg := errorShape(t, "anthropic", r.body)
		if r.status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, r.status, msg, c.status, c.says)
		}
	}
	if got := len(f.mock.Records()) - records; got != 0 {
		t.Fatalf("%d bad requests reached the upstream", got)
	}
	time.Sleep(300 * time.Millisecond) // past a ledger flush
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	if len(rows) != 0 {
		t.Fatalf("%d ledger rows; refused requests must leave none", len(rows))
	}

	// A gzip body that is fine is estimated from its inflated JSON and forwarded as sent.
	req := anthropicRequest(t, f.gw.URL, f.key, "")
	gz := gzipBytes(t, []byte(messagesBody))
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(gz)), int64(len(gz))
	req.Header.Set("Content-Encoding", "gzip")
	if r := do(t, req); r.status != http.StatusOK {
		t.Fatalf("gzip body: %d %s", r.status, r.body)
	}
	if rec := f.mock.Records()[len(f.mock.Records())-1]; rec.Headers.Get("Content-Encoding") != "gzip" || rec.BodyBytes != len(gz) {
		t.Fatalf("upstream got encoding %q and %d bytes, want the caller's %d gzip bytes", rec.Headers.Get("Content-Encoding"), rec.BodyBytes, len(gz))
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	must(t, err)
	must(t, zw.Close())
	return buf.Bytes()
}

// TestStreamCutKeepsHoldOrUsageSeen: a stream that breaks is never refunded:
// it settles on the usage it carried, or keeps the whole hold, marked uncertain.
func TestStreamCutKeepsHoldOrUsageSeen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stream := strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":32,"stream":true`, 1)
	req := anthropicRequest(t, f.gw.URL, f.key, stream)
	req.Header.Set("X-Mock-Disconnect-After-Events", "4") // after message_start
	r, _ := send(req)                                     // ends in an unexpected EOF
	row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	if row.Status != proxy.LedgerUncertain || row.CostMicros <= 0 || row.Usage.InputTokens != 3 {
		t.Fatalf("cut Anthropic stream: %+v, want uncertain, charged the usage seen", row)
	}
	chat := openaiRequest(t, f, `{"model":"gpt-4o-mini","stream":true,"max_completion_tokens":9,"messages":[{"role":"user","content":"hi"}]}`)
	chat.Header.Set("X-Mock-Disconnect-After-Events", "2") // before the usage chunk
	r, _ = send(chat)
	row = ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	if row.Status != proxy.LedgerUncertain || row.CostMicros != row.HeldMicros || row.CostMicros <= 0 {
		t.Fatalf("cut OpenAI stream without usage: %+v, want uncertain, charged the hold", row)
	}
}

// TestForgedRequestIDGetsNothing: a client's X-Request-Id never names the hold;
// reusing one across requests neither collides nor frees anything.
func TestForgedRequestIDGetsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := map[string]bool{}
	for range 3 {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.Header.Set("X-Request-Id", "same-id-every-time")
		r := do(t, req)
		if r.status != http.StatusOK {
			t.Fatalf("%d", r.status)
		}
		id := r.header.Get(proxy.RequestIDHeader)
		if ids[id] || id == "same-id-every-time" {
			t.Fatalf("gateway request id %q reused", id)
		}
		ids[id] = true
		ledgerRow(t, f, id)
	}
}

// TestConcurrentHoldsAcrossReplicas: 64 requests at once over 3 gateway replicas,
// each holding exactly a tenth of the member's budget: exactly 10 are admitted.
func TestConcurrentHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A model whose single output token costs $1, so the hold is about $1.
	_, err := f.st.SetPrice(ctx, store.ActorCLI, store.Price{Model: "dollar-per-token", Provider: "anthropic",
		InputPerMTok: 1, OutputPerMTok: 1_000_000_000_000, MaxOutputTokens: 1, TakenOn: time.Now()})
	must(t, err)
	body := `{"model":"dollar-per-token","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`
	replicas := []string{f.gw.URL, f.replica(t).URL, f.replica(t).URL}
	// Learn the hold from a first call's header, then set the budget to ten of them.
	probe := f.gw.App.Snapshots.Current()
	eventually(t, 10*time.Second, "price reaches the replicas", func() bool {
		probe = f.gw.App.Snapshots.Current()
		_, err := probe.Prices.Lookup("dollar-per-token")
		return err == nil
	})
	price, _ := probe.Prices.Lookup("dollar-per-token")
	hold := price.Hold(int64(len(body)+2)/3, 1)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(10 * hold), BudgetPeriod: "total"})
	eventually(t, 10*time.Second, "budget reaches every replica", func() bool {
		m, _ := f.gw.App.Snapshots.Current().Member(f.member.ID)
		return m.Limits.Budget != nil
	})
	time.Sleep(200 * time.Millisecond) // the other replicas reload on the same NOTIFY

	var wg sync.WaitGroup
	statuses := make(chan int, 64)
	for i := range 64 {
		wg.Go(func() {
			req := anthropicRequest(t, replicas[i%3], f.key, body)
			req.Header.Set("X-Mock-Latency-Ms", "300") // every admitted hold overlaps
			statuses <- do(t, req).status
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != 10 || counts[http.StatusPaymentRequired] != 54 {
		t.Fatalf("statuses %v, want exactly 10×200 and 54×402 (hold %d, budget %d)", counts, hold, 10*hold)
	}
}

// TestRedisLosesCountersMidRun: Redis restarts empty between requests; the team's
// spend is rebuilt from the ledger before its next admission, so the member who
// had spent their budget stays refused and nobody's spend resets.
func TestRedisLosesCountersMidRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	gw := apptest.Start(t, f.dbURL, map[string]string{"ANTHROPIC_API_KEY": anthropicSecret, "REDIS_URL": srv.URL()})
	setLimits(t, f, store.Limits{Budget: dollarsPtr(2000), BudgetPeriod: "monthly"})
	waitForBudget(t, gw, f)
	spendUntilRefused := func() (admitted int) {
		for range 20 {
			r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
			if r.status == http.StatusPaymentRequired {
				return admitted
			}
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)) // durable before the flush
			admitted++
		}
		t.Fatal("never refused")
		return 0
	}
	first := spendUntilRefused()
	srv.Kill()
	srv.Start() // empty: every counter is gone
	if r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)); r.status != http.StatusPaymentRequired {
		t.Fatalf("after Redis lost its counters: %d, want the spent budget still refused", r.status)
	}
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	var spent int64
	for _, r := range rows {
		spent += r.CostMicros
	}
	if spent > 2000 || first == 0 {
		t.Fatalf("spent %d against 2000 over %d calls", spent, first)
	}
}

// TestRedisRestoredFromAnOlderSnapshot: Redis restarts from a backup taken halfway
// through the member's spend, as the outside run did (it then admitted 8 more
// requests, ending at 135% of the budget). The gateway saw newer counters than the
// backup's, so it rebuilds them from the ledger: the member stays refused.
func TestRedisRestoredFromAnOlderSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	gw := apptest.Start(t, f.dbURL, map[string]string{"ANTHROPIC_API_KEY": anthropicSecret, "REDIS_URL": srv.URL()})
	setLimits(t, f, store.Limits{Budget: dollarsPtr(2000), BudgetPeriod: "monthly"})
	waitForBudget(t, gw, f)
	call := func() int {
		r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
		if r.status == http.StatusOK {
			ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)) // durable before the flush
		} else if r.status != http.StatusPaymentRequired {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return r.status
	}
	admitted := 0
	for call() == http.StatusOK {
		admitted++
		if admitted == 1 {
			srv.Save()
		}
		if admitted > 20 {
			t.Fatal("never refused")
		}
	}
	if admitted < 2 {
		t.Fatalf("refused after %d requests: the backup must be older than the last ones", admitted)
	}
	srv.Kill()
	srv.Start() // from the backup: one request spent
	for i := range 3 {
		if status := call(); status != http.StatusPaymentRequired {
			t.Fatalf("request %d after the restore: %d, want the spent budget still refused", i, status)
		}
	}
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	var spent int64
	for _, r := range rows {
		spent += r.CostMicros
	}
	if spent > 2000 {
		t.Fatalf("spent %d against 2000", spent)
	}
}

// TestFlushAllWithRequestsInFlight: FLUSHALL while six requests are in flight, as the
// outside run did (its rebuild forgot their holds, admitted every new request and
// ended at 138% of the budget, and the streams were then recorded uncertain at their
// whole hold). The rebuild holds their amounts again, so only what the budget has
// room for beside them is admitted, and each of them settles at its real cost.
func TestFlushAllWithRequestsInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := redistest.StartServer(t)
	gw := apptest.Start(t, f.dbURL, map[string]string{"ANTHROPIC_API_KEY": anthropicSecret, "REDIS_URL": srv.URL()})
	probe := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody))
	if probe.status != http.StatusOK {
		t.Fatalf("probe: %d %s", probe.status, probe.body)
	}
	first := ledgerRow(t, f, probe.header.Get(proxy.RequestIDHeader))
	hold := first.HeldMicros
	// Room for the probe and ten more holds.
	setLimits(t, f, store.Limits{Budget: dollarsPtr(first.CostMicros + 10*hold), BudgetPeriod: "monthly"})
	waitForBudget(t, gw, f)

	const inFlight = 6
	done := make(chan response, inFlight)
	for range inFlight {
		go func() {
			req := anthropicRequest(t, gw.URL, f.key, messagesBody)
			req.Header.Set("X-Mock-Latency-Ms", "3000")
			done <- do(t, req)
		}()
	}
	eventually(t, 10*time.Second, "the requests in flight reach the ledger as held", func() bool {
		rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
		must(t, err)
		held := 0
		for _, r := range rows {
			if r.Status == proxy.LedgerHeld {
				held++
			}
		}
		return held == inFlight
	})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	must(t, c.FlushAll(context.Background()).Err())

	counts := map[int]int{}
	for range 8 {
		counts[do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)).status]++
	}
	// One after another, each needs a hold of room and then costs what the probe did;
	// forgetting the holds in flight would admit all eight.
	want := 0
	for room := (10 - inFlight) * hold; room >= hold; room -= first.CostMicros {
		want++
	}
	if counts[http.StatusOK] != want || counts[http.StatusPaymentRequired] != 8-want {
		t.Fatalf("after FLUSHALL with %d holds in flight: %v, want %d×200 and the rest 402", inFlight, counts, want)
	}
	for range inFlight {
		r := <-done
		if r.status != http.StatusOK {
			t.Fatalf("a request in flight at the flush: %d %s", r.status, r.body)
		}
		if row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader)); row.Status != proxy.LedgerSettled || row.CostMicros >= row.HeldMicros {
			t.Fatalf("a request in flight at the flush ended %s at %d µ$ (hold %d), want settled at its real cost", row.Status, row.CostMicros, row.HeldMicros)
		}
	}
}

// TestUnderEstimationOvershootsByOneRequest: the provider reports ten times and
// more the tokens the hold assumed (a huge prompt-cache write the body does not
// show); each shortfall is charged as debt, so the member ends at most one
// request's excess over budget and is refused from then on.
func TestUnderEstimationOvershootsByOneRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const budget = 1_000_000 // $1
	setLimits(t, f, store.Limits{Budget: dollarsPtr(budget), BudgetPeriod: "total"})
	waitForBudget(t, f.gw, f)
	var spent, largest, hold int64
	for i := range 20 {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.Header.Set("X-Mock-Cache-Write-Tokens", "100000") // $0.375 at $3.75 per million
		r := do(t, req)
		if r.status == http.StatusPaymentRequired {
			if i < 2 {
				t.Fatalf("refused after %d requests", i)
			}
			break
		}
		row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
		if row.CostMicros < 10*row.HeldMicros {
			t.Fatalf("not an under-estimate: cost %d, hold %d", row.CostMicros, row.HeldMicros)
		}
		spent += row.CostMicros
		largest, hold = max(largest, row.CostMicros), row.HeldMicros
	}
	if over := spent - budget; over > largest-hold {
		t.Fatalf("spent %d against %d: %d over, more than one request's excess (%d)", spent, budget, over, largest-hold)
	}
	t.Logf("spent $%d.%06d against a $1 budget with 10×+ under-estimates; the overshoot is within one request", spent/1e6, spent%1e6)
}

// TestMissingMaxTokensHeldAtModelMaximum: a request that sets no output ceiling
// is held at the model's maximum output, never at zero.
func TestMissingMaxTokensHeldAtModelMaximum(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := do(t, chatRequest(t, f.gw.URL, f.key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
	price, err := f.gw.App.Snapshots.Current().Prices.Lookup("gpt-4o-mini")
	must(t, err)
	if min := price.Hold(1, price.MaxOutputTokens); row.HeldMicros < min || row.HeldMicros == 0 {
		t.Fatalf("held %d micro-dollars without max_tokens; the model's maximum output alone is %d", row.HeldMicros, min)
	}
}
