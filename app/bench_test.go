package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
)

// BenchmarkGatewayPaidPOST drives one gateway replica end to end over loopback:
// a member key with a rate limit, a TPM limit and a budget, a team budget on top
// (the loadtest overhead scenario's limits), so every request is authenticated,
// estimated, admitted with a hold in Redis, proxied to the mock provider, tapped
// for usage, settled in Redis and written to the ledger in Postgres. The figures
// include the in-process mock provider and HTTP client, which do not change
// between gateway versions; LOG_LEVEL is error, as in the loadtest.
//
//	go test -run '^$' -bench GatewayPaidPOST -benchmem -count 6 ./app/
func BenchmarkGatewayPaidPOST(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	budget, teamBudget := int64(1_000_000_000_000), int64(2_000_000_000_000)
	if _, err := f.st.SetMemberLimits(ctx, store.ActorCLI, f.team.ID, f.member.ID, store.Limits{RateAlgorithm: "token_bucket",
		RateLimit: 1_000_000, RatePeriod: time.Second, TokensPerMinute: 30_000_000, Budget: &budget, BudgetPeriod: "total"}); err != nil {
		b.Fatal(err)
	}
	if _, err := f.st.SetTeamLimits(ctx, store.ActorCLI, f.team.ID, store.Limits{RatePeriod: time.Second, Budget: &teamBudget,
		BudgetPeriod: "total"}); err != nil {
		b.Fatal(err)
	}
	gw := apptest.Start(b, f.dbURL, map[string]string{
		"ANTHROPIC_API_KEY": anthropicSecret,
		"REDIS_URL":         "redis://127.0.0.1:6379/0",
		"REDIS_KEY_PREFIX":  f.redisPrefix,
		"LOG_LEVEL":         "error",
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	for _, bench := range []struct{ name, body string }{
		{"json", messagesBody},
		{"stream", strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":32,"stream":true`, 1)},
	} {
		b.Run(bench.name, func(b *testing.B) {
			send := func() {
				req, err := http.NewRequest(http.MethodPost, gw.URL+"/anthropic/v1/messages", strings.NewReader(bench.body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("X-Api-Key", f.key)
				req.Header.Set("Anthropic-Version", "2023-06-01")
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%d %v", resp.StatusCode, err)
				}
			}
			send() // warm the connections and the snapshot
			for b.Loop() {
				send()
			}
			f.mock.Reset()
		})
	}
}
