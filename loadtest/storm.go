package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// storm is the provider 429 storm: a mock provider whose account allows
// stormRPM requests a minute, and stormMembers members on 2 replicas offering
// far more. With PROVIDER_RATE_LIMITS off every request over the account's
// limit reaches the provider and comes back 429; on, the replicas pace their
// traffic to the account's rate learned from its headers, shared through
// Redis, and answer the excess themselves. It compares the provider's 429s
// and the 2xx the members got per second.
func storm(ctx context.Context, c *cluster, o options) (table, error) {
	const (
		stormRPM     = 120 // 2 a second, after a burst of 120
		stormMembers = 4
		perMember    = 5 // requests a second each: 20 against 2
		replicaCount = 2
	)
	// 10-20s: shorter, the account's first burst of stormRPM would be all there is.
	d := min(max(o.duration, 10*time.Second), 20*time.Second)
	keys, err := c.members(ctx, "storm", stormMembers)
	if err != nil {
		return table{}, err
	}
	t := table{
		Title: fmt.Sprintf("Provider 429 storm: an account of %d requests/min, %d members offering %d req/s each for %s over %d replicas",
			stormRPM, stormMembers, perMember, d, replicaCount),
		Columns: []string{"awareness", "sent", "2xx", "2xx/s", "gateway 429", "upstream requests", "upstream 429", "other", "p50", "p99"},
	}
	var raw []outcome
	var upstream429 [2]int
	var okPerSec [2]float64
	for i, aware := range []bool{false, true} {
		// A fresh account each run: its bucket starts full.
		port, err := freePort()
		if err != nil {
			return t, err
		}
		mockURL := "http://127.0.0.1:" + port
		mockProc, err := c.start(ctx, "mockprovider", []string{"-addr", "127.0.0.1:" + port, "-anthropic-key", c.credential,
			"-rpm", strconv.Itoa(stormRPM)}, nil, mockURL+"/_mock/records")
		if err != nil {
			return t, err
		}
		prefix := "/storm" + strconv.Itoa(i)
		if _, err := c.Store.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: c.TeamID, Preset: "anthropic", Prefix: prefix, UpstreamURL: mockURL}); err != nil {
			return t, err
		}
		// The mock's /_mock/records GET above was not a provider request; reset anyway.
		if resp, err := http.Post(mockURL+"/_mock/reset", "", nil); err == nil {
			resp.Body.Close()
		}
		for range replicaCount {
			g, err := c.startGateway(ctx, replicaCount, true, []string{"PROVIDER_RATE_LIMITS=" + strconv.FormatBool(aware)})
			if err != nil {
				return t, err
			}
			c.Replicas = append(c.Replicas, g.Base)
		}
		outs := make([]outcome, stormMembers)
		var wg sync.WaitGroup
		for m, key := range keys {
			wg.Go(func() {
				outs[m] = attackPath(fmt.Sprintf("member %d", m), c.Replicas, key, prefix, perMember, d)
			})
		}
		wg.Wait()
		sent, refused, err := mockCounts(mockURL)
		c.stopProc(mockProc)
		c.stopReplicas()
		if err != nil {
			return t, err
		}
		total := outcome{Name: fmt.Sprintf("awareness %t", aware), Codes: map[string]int{}}
		for _, out := range outs {
			total.Sent += out.Sent
			for code, n := range out.Codes {
				total.Codes[code] += n
			}
			total.P50, total.P99 = max(total.P50, out.P50), max(total.P99, out.P99)
		}
		raw = append(raw, append([]outcome{total}, outs...)...)
		ok := total.count(http.StatusOK)
		limited := total.count(http.StatusTooManyRequests)
		gateway429 := limited - refused
		upstream429[i], okPerSec[i] = refused, float64(ok)/d.Seconds()
		mode := "off"
		if aware {
			mode = "on"
		}
		t.Rows = append(t.Rows, []string{mode, strconv.FormatUint(total.Sent, 10), strconv.Itoa(ok), fmt.Sprintf("%.2f", okPerSec[i]),
			strconv.Itoa(gateway429), strconv.Itoa(sent), strconv.Itoa(refused), strconv.Itoa(int(total.Sent) - ok - limited),
			ms(total.P50), ms(total.P99)})
	}
	t.Raw = raw
	drop := 100 * (1 - float64(upstream429[1])/float64(max(upstream429[0], 1)))
	t.Notes = append(t.Notes,
		fmt.Sprintf("upstream 429s drop by %.1f%% with awareness on (target at least 90%%); admitted %.2f vs %.2f 2xx/s (target: no loss)",
			drop, okPerSec[1], okPerSec[0]),
		"p50 and p99 are the worst member's; the account's first minute is a burst of its whole limit, as the mock's bucket starts full",
		"gateway 429 = 429s the members got that the provider never sent (the gateway's own, with Retry-After)")
	return t, nil
}

// mockCounts reads the mock's log: the provider requests it got and how many it refused.
func mockCounts(mockURL string) (sent, refused int, err error) {
	resp, err := http.Get(mockURL + "/_mock/records")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var recs []struct{ Status int }
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		return 0, 0, err
	}
	for _, r := range recs {
		sent++
		if r.Status == http.StatusTooManyRequests {
			refused++
		}
	}
	return sent, refused, nil
}
