package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// burstRoom is how many requests the limit under test has room for.
const burstRoom = 2000

// burst releases o.burst requests at once, round-robin over 3 replicas, at one
// member whose limit has room for burstRoom of them, with the in-flight caps
// off so that the limit is the only gate. Every caller must get an answer
// (200, or 429/402 with Retry-After), none a 503, and exactly the room is
// admitted: a sliding window of 2,000 an hour; a TPM limit of 2,000 requests'
// reservations (plus what it refills while the burst is decided); a budget of
// 2,000 requests' holds, never spent past (daily, so that its 402s say when it
// comes back). The admitted requests' upstream
// answers wait 15 s, so every admission is decided before any settle gives
// room back.
func burst(ctx context.Context, c *cluster, o options) (table, error) {
	t := table{
		Title: fmt.Sprintf("Burst: %d requests at once over %d replicas against room for %d (MAX_IN_FLIGHT and MEMBER_MAX_IN_FLIGHT off)",
			o.burst, replicas, burstRoom),
		Columns: []string{"limit", "sent", "200", "429", "402", "503", "other", "transport errors", "admitted/ceiling",
			"refusals with Retry-After", "refusal p50", "refusal p99", "decided in"},
	}
	parsed, err := estimate.Parse(estimate.AnthropicMessages, []byte(messagesBody))
	if err != nil {
		return t, err
	}
	const maxTokens = 16 // messagesBody's max_tokens
	tokens := parsed.InputTokens + maxTokens
	hold, err := c.holdOf(ctx)
	if err != nil {
		return t, err
	}
	budget := int64(burstRoom) * hold
	variants := []struct {
		name   string
		limits store.Limits
		// ceiling is the most that may be admitted when the burst took d to decide.
		ceiling func(d time.Duration) int
	}{
		{"sliding window 2,000/h", store.Limits{RateAlgorithm: "sliding_window", RateLimit: burstRoom, RatePeriod: time.Hour},
			func(time.Duration) int { return burstRoom }},
		{fmt.Sprintf("TPM %d (2,000 × %d tokens)", burstRoom*tokens, tokens), store.Limits{TokensPerMinute: burstRoom * tokens, RatePeriod: time.Second},
			func(d time.Duration) int { return burstRoom + int(int64(burstRoom)*int64(d)/int64(time.Minute)) }},
		{fmt.Sprintf("daily budget $%d.%06d (2,000 holds)", budget/1e6, budget%1e6), store.Limits{Budget: &budget, BudgetPeriod: "daily", RatePeriod: time.Second},
			func(time.Duration) int { return burstRoom }},
	}
	var notes []string
	for _, v := range variants {
		email := "burst-" + strings.Fields(v.name)[0] + "@loadtest.dev"
		key, err := c.member(ctx, email, v.limits)
		if err != nil {
			return t, err
		}
		if err := c.startReplicas(ctx, replicas, true, nil); err != nil {
			return t, err
		}
		r := fire(c.Replicas, key, o.burst)
		c.stopReplicas()
		admitted := r.codes[http.StatusOK]
		ceiling := v.ceiling(r.decided)
		other := o.burst - admitted - r.codes[http.StatusTooManyRequests] - r.codes[http.StatusPaymentRequired] -
			r.codes[http.StatusServiceUnavailable] - r.errors
		t.Rows = append(t.Rows, []string{v.name, strconv.Itoa(o.burst), strconv.Itoa(admitted),
			strconv.Itoa(r.codes[http.StatusTooManyRequests]), strconv.Itoa(r.codes[http.StatusPaymentRequired]),
			strconv.Itoa(r.codes[http.StatusServiceUnavailable]), strconv.Itoa(other), strconv.Itoa(r.errors),
			fmt.Sprintf("%d / %d", admitted, ceiling), fmt.Sprintf("%d of %d", r.retryAfter, r.refused),
			ms(r.p50), ms(r.p99), r.decided.Round(10 * time.Millisecond).String()})
		for _, s := range r.samples {
			notes = append(notes, v.name+": "+s)
		}
		if v.limits.Budget != nil {
			spent, err := c.memberSpend(ctx, email)
			if err != nil {
				return t, err
			}
			notes = append(notes, fmt.Sprintf("%s: the ledger shows $%d.%06d spent of the $%d.%06d budget once every admitted request settled",
				v.name, spent/1e6, spent%1e6, budget/1e6, budget%1e6))
		}
	}
	t.Notes = append(t.Notes, fmt.Sprintf("each request reserves %d tokens and holds $%d.%06d; the TPM ceiling adds the bucket's refill while the burst was decided", tokens, hold/1e6, hold%1e6))
	t.Notes = append(t.Notes, notes...)
	return t, nil
}

// burstResult counts one burst's answers.
type burstResult struct {
	codes             map[int]int
	errors            int
	refused           int // 429 and 402
	retryAfter        int // refusals carrying Retry-After
	p50, p99, decided time.Duration
	samples           []string // one body per unexpected status
}

// fire sends n requests at once, round-robin over the replicas, each on its
// own connection, and waits for every answer.
func fire(replicas []string, key string, n int) burstResult {
	transport := &http.Transport{DisableKeepAlives: true, MaxIdleConnsPerHost: -1}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	type answer struct {
		status     int
		retryAfter bool
		took       time.Duration
		body       string
		err        error
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i := range n {
		ready.Add(1)
		done.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, replicas[i%len(replicas)]+"/anthropic/v1/messages", strings.NewReader(messagesBody))
			req.Header = http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"},
				"X-Mock-Latency-Ms": {"15000"}}
			ready.Done()
			<-start
			began := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = answer{err: err, took: time.Since(began)}
				return
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			answers[i] = answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After") != "", took: time.Since(began), body: string(body)}
		})
	}
	ready.Wait()
	close(start)
	done.Wait()
	r := burstResult{codes: map[int]int{}}
	var refusals []time.Duration
	seen := map[int]bool{}
	for _, a := range answers {
		if a.err != nil {
			r.errors++
			if !seen[0] {
				seen[0] = true
				r.samples = append(r.samples, "transport error: "+a.err.Error())
			}
			continue
		}
		r.codes[a.status]++
		switch a.status {
		case http.StatusOK:
		case http.StatusTooManyRequests, http.StatusPaymentRequired:
			r.refused++
			if a.retryAfter {
				r.retryAfter++
			}
			refusals = append(refusals, a.took)
			r.decided = max(r.decided, a.took)
		default:
			r.decided = max(r.decided, a.took)
			if !seen[a.status] {
				seen[a.status] = true
				r.samples = append(r.samples, fmt.Sprintf("%d: %s", a.status, a.body))
			}
		}
	}
	if len(refusals) > 0 {
		slices.Sort(refusals)
		r.p50, r.p99 = refusals[len(refusals)/2], refusals[len(refusals)*99/100]
	}
	return r
}

// holdOf is what one messagesBody request holds, read from the budget header of
// a probe member's first request.
func (c *cluster) holdOf(ctx context.Context) (int64, error) {
	budget := int64(1_000_000_000)
	key, err := c.member(ctx, "burst-probe@loadtest.dev", store.Limits{Budget: &budget, BudgetPeriod: "total", RatePeriod: time.Second})
	if err != nil {
		return 0, err
	}
	if err := c.startReplicas(ctx, 1, true, nil); err != nil {
		return 0, err
	}
	defer c.stopReplicas()
	req, _ := http.NewRequest(http.MethodPost, c.Replicas[0]+"/anthropic/v1/messages", strings.NewReader(messagesBody))
	req.Header = http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	left, err := strconv.ParseInt(resp.Header.Get("X-Budget-Remaining-Micros"), 10, 64)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("probe: %s, budget header %q", resp.Status, resp.Header.Get("X-Budget-Remaining-Micros"))
	}
	return budget - left, nil
}

// memberSpend is what the ledger says the member has spent, once every row is
// final.
func (c *cluster) memberSpend(ctx context.Context, email string) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var held, spent int64
		err := c.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE l.status = 'held'), coalesce(sum(l.cost_micros), 0)
			FROM ledger l JOIN member m ON m.id = l.member_id WHERE m.email = $1`, email).Scan(&held, &spent)
		if err != nil {
			return 0, err
		}
		if held == 0 || time.Now().After(deadline) {
			return spent, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}
