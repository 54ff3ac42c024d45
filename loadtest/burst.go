package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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
		r, err := fire(ctx, c.Replicas, key, o.burst)
		c.stopReplicas()
		if err != nil {
			return t, err
		}
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

// burstAnswer is one request's answer as a burst client reports it.
type burstAnswer struct {
	Status     int           `json:"status,omitempty"`
	RetryAfter bool          `json:"retry_after,omitempty"`
	Took       time.Duration `json:"took"` // from this request's send to its answer
	At         time.Duration `json:"at"`   // from the release to its answer
	Body       string        `json:"body,omitempty"`
	Err        string        `json:"err,omitempty"`
}

// fire sends n requests at once, an even share to each replica, each on its
// own connection, and waits for every answer. The requests go out from one
// child process per replica (burstclient): one process holding a socket per
// request would need more open files than a usual hard limit of 20,000.
func fire(ctx context.Context, replicas []string, key string, n int) (burstResult, error) {
	self, err := os.Executable()
	if err != nil {
		return burstResult{}, err
	}
	type client struct {
		cmd     *exec.Cmd
		release io.WriteCloser
		out     *bufio.Reader
	}
	var clients []client
	defer func() {
		for _, c := range clients {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	}()
	for i, url := range replicas {
		share := n / len(replicas)
		if i < n%len(replicas) {
			share++
		}
		cmd := exec.CommandContext(ctx, self, "burstclient", "-url", url+"/anthropic/v1/messages", "-key", key, "-n", strconv.Itoa(share))
		cmd.Stderr = os.Stderr
		release, err := cmd.StdinPipe()
		if err != nil {
			return burstResult{}, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return burstResult{}, err
		}
		if err := cmd.Start(); err != nil {
			return burstResult{}, err
		}
		clients = append(clients, client{cmd, release, bufio.NewReader(stdout)})
	}
	for _, c := range clients {
		if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
			return burstResult{}, fmt.Errorf("burst client: %q, %v", line, err)
		}
	}
	for _, c := range clients {
		_ = c.release.Close() // its stdin ends: the release
	}
	var answers []burstAnswer
	for _, c := range clients {
		var got []burstAnswer
		if err := json.NewDecoder(c.out).Decode(&got); err != nil {
			return burstResult{}, fmt.Errorf("burst client's answers: %w", err)
		}
		answers = append(answers, got...)
	}
	return countBurst(answers), nil
}

// countBurst tallies the answers. A burst is decided when its last refusal
// is answered, counted from the release: a request sent late (its goroutine
// ran late) was still decided that long after the first.
func countBurst(answers []burstAnswer) burstResult {
	r := burstResult{codes: map[int]int{}}
	var refusals []time.Duration
	seen := map[int]bool{}
	for _, a := range answers {
		if a.Err != "" {
			r.errors++
			if !seen[0] {
				seen[0] = true
				r.samples = append(r.samples, "transport error: "+a.Err)
			}
			continue
		}
		r.codes[a.Status]++
		switch a.Status {
		case http.StatusOK:
		case http.StatusTooManyRequests, http.StatusPaymentRequired:
			r.refused++
			if a.RetryAfter {
				r.retryAfter++
			}
			refusals = append(refusals, a.Took)
			r.decided = max(r.decided, a.At)
		default:
			r.decided = max(r.decided, a.At)
			if !seen[a.Status] {
				seen[a.Status] = true
				r.samples = append(r.samples, fmt.Sprintf("%d: %s", a.Status, a.Body))
			}
		}
	}
	if len(refusals) > 0 {
		slices.Sort(refusals)
		r.p50, r.p99 = refusals[len(refusals)/2], refusals[len(refusals)*99/100]
	}
	return r
}

// burstClient is the hidden subcommand fire starts: it readies n requests to
// url, each on its own connection, says "ready", sends them all when its stdin
// ends, and writes their answers as one JSON array.
func burstClient(args []string) error {
	fs := flag.NewFlagSet("burstclient", flag.ExitOnError)
	url := fs.String("url", "", "where to POST messagesBody")
	key := fs.String("key", "", "X-Api-Key")
	n := fs.Int("n", 0, "requests")
	_ = fs.Parse(args) // ExitOnError
	if _, err := raiseFileLimit(); err != nil {
		return err
	}
	transport := &http.Transport{DisableKeepAlives: true, MaxIdleConnsPerHost: -1}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	answers := make([]burstAnswer, *n)
	start := make(chan struct{})
	var released time.Time
	var ready, done sync.WaitGroup
	for i := range *n {
		ready.Add(1)
		done.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, *url, strings.NewReader(messagesBody))
			req.Header = http.Header{"X-Api-Key": {*key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"},
				"X-Mock-Latency-Ms": {"15000"}}
			ready.Done()
			<-start
			began := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = burstAnswer{Err: err.Error(), Took: time.Since(began), At: time.Since(released)}
				return
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			answers[i] = burstAnswer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After") != "",
				Took: time.Since(began), At: time.Since(released)}
			switch resp.StatusCode {
			case http.StatusOK, http.StatusTooManyRequests, http.StatusPaymentRequired:
			default: // a sample for the notes
				answers[i].Body = string(body)
			}
		})
	}
	ready.Wait()
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	released = time.Now()
	close(start)
	done.Wait()
	return json.NewEncoder(os.Stdout).Encode(answers)
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
