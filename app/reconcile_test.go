package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// TestLedgerReconcilesWithProvider drives a mixed run of 1,000 requests through
// two replicas (JSON and streamed calls to both providers, cache and reasoning
// tokens, cut streams, provider errors, client retries) and compares every ledger
// row with the mock provider's own usage log: 0 mismatches, 0 orphans, and no
// tolerance term anywhere.
func TestLedgerReconcilesWithProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	replicas := []string{f.gw.URL, f.replica(t).URL}
	stream := strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":32,"stream":true`, 1)
	chat := `{"model":"gpt-4o-mini","stream":%t,"max_completion_tokens":12,"messages":[{"role":"user","content":"hello %d"}]}`
	kinds := []func(gw string, i int) *http.Request{
		func(gw string, i int) *http.Request { return anthropicRequest(t, gw, f.key, messagesBody) },
		func(gw string, i int) *http.Request { return anthropicRequest(t, gw, f.key, stream) },
		func(gw string, i int) *http.Request {
			req := anthropicRequest(t, gw, f.key, stream)
			req.Header.Set("X-Mock-Cache-Read-Tokens", "500")
			req.Header.Set("X-Mock-Cache-Write-Tokens", "40")
			return req
		},
		func(gw string, i int) *http.Request { return chatRequest(t, gw, f.key, fmt.Sprintf(chat, true, i)) },
		func(gw string, i int) *http.Request {
			req := chatRequest(t, gw, f.key, fmt.Sprintf(chat, false, i))
			req.Header.Set("X-Mock-Cache-Read-Tokens", "7")
			req.Header.Set("X-Mock-Reasoning-Tokens", "5")
			return req
		},
		func(gw string, i int) *http.Request { // cut after message_start: usage seen, not final
			req := anthropicRequest(t, gw, f.key, stream)
			req.Header.Set("X-Mock-Disconnect-After-Events", "3")
			return req
		},
		func(gw string, i int) *http.Request { // cut before the usage chunk: the hold is kept
			req := chatRequest(t, gw, f.key, fmt.Sprintf(chat, true, i))
			req.Header.Set("X-Mock-Disconnect-After-Events", "2")
			return req
		},
		func(gw string, i int) *http.Request { // overloaded: released, and the client retries
			req := anthropicRequest(t, gw, f.key, messagesBody)
			req.Header.Set("X-Mock-Fail-Status", "529")
			return req
		},
	}
	const total = 1000
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				gw := replicas[i%len(replicas)]
				resp, _ := send(kinds[i%len(kinds)](gw, i)) // cut streams end in an error
				if resp.status == 529 {
					send(anthropicRequest(t, gw, f.key, messagesBody)) // the SDK's retry
				}
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()

	records := f.mock.Records()
	var report ledger.Report
	eventually(t, 20*time.Second, "every row settled and flushed", func() bool {
		rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 10*total)
		must(t, err)
		for _, r := range rows {
			if r.Status == proxy.LedgerHeld {
				return false
			}
		}
		report = ledger.ReconcileProvider(rows, records, f.gw.App.Snapshots.Current().Prices)
		return report.Checked == len(records)
	})
	if !report.OK() || report.Checked < total {
		t.Fatalf("checked %d of %d provider records: %d mismatches %v, %d orphans %v", report.Checked, len(records),
			len(report.Mismatches), head(report.Mismatches), len(report.Orphans), head(report.Orphans))
	}
	t.Logf("reconciled %d ledger rows with the provider's log: 0 mismatches, 0 orphans", report.Checked)
}

// reconcileCLI runs the CLI on the fixture's database with redisURL ("" for
// none) and returns what it printed.
func reconcileCLI(f *fixture, redisURL string, args ...string) (string, error) {
	var out strings.Builder
	env := map[string]string{"DATABASE_URL": f.dbURL, "REDIS_URL": redisURL, "REDIS_KEY_PREFIX": f.redisPrefix}
	err := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: io.Discard,
		Getenv: func(name string) string { return env[name] }})
	return out.String(), err
}

// TestReconcileSaysWhenRedisWasNotChecked: `admin reconcile` without REDIS_URL,
// or with a Redis that does not answer, says the counters were not checked
// and exits non-zero instead of printing a clean result; --skip-redis makes
// that a choice, reconciling with the provider's log alone.
func TestReconcileSaysWhenRedisWasNotChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "monthly"})
	waitForBudget(t, f.gw, f)
	ledgerRow(t, f, do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)).header.Get(proxy.RequestIDHeader))
	records := f.mockURL + "/_mock/records"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := "redis://" + ln.Addr().String() + "/0"
	ln.Close()
	for _, tc := range []struct{ name, redisURL, why string }{
		{"without REDIS_URL", "", "REDIS_URL is not set"},
		{"Redis unreachable", closed, "Redis did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{{"--provider-log", records}, nil} {
				out, err := reconcileCLI(f, tc.redisURL, append([]string{"admin", "reconcile", "--team", "acme"}, args...)...)
				if err == nil || !strings.Contains(err.Error(), "not fully reconciled") || !strings.Contains(out, "not checked: Redis spend counters: "+tc.why) {
					t.Errorf("reconcile %v: %v\n%s\nwant a non-zero exit saying Redis was not checked (%s)", args, err, out, tc.why)
				}
			}
			out, err := reconcileCLI(f, tc.redisURL, "admin", "reconcile", "--team", "acme", "--provider-log", records, "--skip-redis")
			if err != nil || !strings.Contains(out, "1 rows checked, 0 mismatches, 0 orphans") || strings.Contains(out, "not checked") {
				t.Errorf("reconcile --skip-redis: %v\n%s", err, out)
			}
		})
	}
}

func chatRequest(t *testing.T, gw, key, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gw+"/openai/v1/chat/completions", strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// TestReconcileCommand: `admin usage` lists the ledger and `admin reconcile`
// passes on an honest ledger and fails, naming the row, on a tampered one.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "monthly"})
	waitForBudget(t, f.gw, f)
	var ids []string
	for range 5 {
		ids = append(ids, do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody)).header.Get(proxy.RequestIDHeader))
	}
	ledgerRow(t, f, ids[len(ids)-1])
	run := func(args ...string) (string, error) { return reconcileCLI(f, "redis://127.0.0.1:6379/0", args...) }
	out, err := run("admin", "usage", "--team", "acme")
	if err != nil || !strings.Contains(out, ids[0]) || !strings.Contains(out, "5 requests") {
		t.Fatalf("admin usage: %v\n%s", err, out)
	}
	records := f.mockURL + "/_mock/records"
	if out, err := run("admin", "reconcile", "--team", "acme", "--provider-log", records); err != nil || !strings.Contains(out, "5 rows checked, 0 mismatches, 0 orphans") {
		t.Fatalf("honest ledger: %v\n%s", err, out)
	}
	_, err = dbtest.Pool(t, f.dbURL).Exec(context.Background(), "UPDATE ledger SET cost_micros = cost_micros - 1 WHERE request_id = $1", ids[2])
	must(t, err)
	out, err = run("admin", "reconcile", "--team", "acme", "--provider-log", records)
	if err == nil || !strings.Contains(out, "mismatch: "+ids[2]) || !strings.Contains(out, "Redis counts") {
		t.Fatalf("tampered ledger: %v\n%s", err, out)
	}
}
