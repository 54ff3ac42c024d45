package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// fairWait is FAIR_QUEUE_WAIT for the waiting-room scenarios: the default.
const fairWait = 3 * time.Second

// weighted is a tier with no limits and the given weight.
func weighted(name string, weight int64) store.Tier {
	t := store.NewTier(name)
	t.Weight = weight
	return t
}

// memberInTier adds a member (no limits of their own) in a new tier, and
// returns a key for them.
func (c *cluster) memberInTier(ctx context.Context, email string, t store.Tier) (string, error) {
	if _, err := c.Store.CreateTier(ctx, store.ActorCLI, c.TeamID, t); err != nil {
		return "", err
	}
	m, err := c.Store.AddMember(ctx, store.ActorCLI, c.TeamID, email, store.RoleMember)
	if err != nil {
		return "", err
	}
	if _, err := c.Store.AssignTier(ctx, store.ActorCLI, c.TeamID, m.ID, t.Name); err != nil {
		return "", err
	}
	k, err := c.Store.IssueKey(ctx, store.ActorCLI, c.TeamID, m.ID, "loadtest")
	return k.Plaintext, err
}

// answer is one request's result as the waiting-room scenarios read it.
type answer struct {
	status int
	took   time.Duration
	queued time.Duration // X-Tollgate-Queued-Ms
	tokens int64         // usage the provider reported (input + output)
	err    error
}

// send makes one Messages request asking for maxTokens of output, which the
// mock then reports as used, so a request's tokens are what it reserved.
func send(client *http.Client, base, key string, maxTokens int) answer {
	body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, maxTokens)
	req, _ := http.NewRequest(http.MethodPost, base+"/anthropic/v1/messages", strings.NewReader(body))
	req.Header = http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"},
		"X-Mock-Output-Tokens": {strconv.Itoa(maxTokens)}}
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(began)}
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, took: time.Since(began)}
	if q, err := strconv.Atoi(resp.Header.Get("X-Tollgate-Queued-Ms")); err == nil {
		a.queued = time.Duration(q) * time.Millisecond
	}
	var u struct {
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &u) == nil {
		a.tokens = u.Usage.InputTokens + u.Usage.OutputTokens
	}
	return a
}

// tally sums one member's answers.
type tally struct {
	Name   string          `json:"name"`
	Sent   int             `json:"sent"`
	Codes  map[int]int     `json:"codes"`
	Errors int             `json:"transport_errors"`
	Tokens int64           `json:"admitted_tokens"`
	Waits  []time.Duration `json:"-"` // X-Tollgate-Queued-Ms of admitted requests
	Took   []time.Duration `json:"-"` // latency of admitted requests
	mu     sync.Mutex
	// Only answers that arrive between from and until (when set) are counted:
	// a long wait sent before the run or answered after it is not the run's.
	from, until time.Time
}

func newTally(name string) *tally { return &tally{Name: name, Codes: map[int]int{}} }

// countBetween sets the window of answers the tallies count.
func countBetween(from, until time.Time, ts ...*tally) {
	for _, t := range ts {
		t.mu.Lock()
		t.from, t.until = from, until
		t.mu.Unlock()
	}
}

func (t *tally) add(a answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := time.Now(); now.Before(t.from) || (!t.until.IsZero() && now.After(t.until)) {
		return
	}
	t.Sent++
	if a.err != nil {
		t.Errors++
		return
	}
	t.Codes[a.status]++
	if a.status == http.StatusOK {
		t.Tokens += a.tokens
		t.Waits = append(t.Waits, a.queued)
		t.Took = append(t.Took, a.took)
	}
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// closedLoop keeps workers requests of maxTokens in flight for the member until
// stop closes, round-robin over the replicas. The first answer that waited in
// the room runs queued.
func closedLoop(client *http.Client, replicas []string, key string, maxTokens, workers int, stop <-chan struct{}, t *tally, queued func()) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := send(client, replicas[i%len(replicas)], key, maxTokens)
				if a.queued > 0 {
					queued()
				}
				t.add(a)
			}
		})
	}
	wg.Wait()
}

// openLoop sends rate requests a second of maxTokens for d whatever the answers
// take, round-robin over the replicas.
func openLoop(client *http.Client, replicas []string, key string, maxTokens, rate int, d time.Duration, t *tally) {
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	began := time.Now()
	for i := 0; ; i++ {
		at := began.Add(time.Duration(i) * interval)
		if at.Sub(began) >= d {
			break
		}
		time.Sleep(time.Until(at))
		wg.Go(func() { t.add(send(client, replicas[i%len(replicas)], key, maxTokens)) })
	}
	wg.Wait()
}

// fair: two members in tiers of weights 8 and 1, both offering far more than
// their team's TPM limit (the only limit that binds), through 3 replicas with
// the waiting room on. Admitted tokens must split 8:1 within 10%. Beside them
// a third member sends, every few seconds, one request reserving 100× a small
// one's tokens: it must be admitted, and its wait is reported.
func fair(ctx context.Context, c *cluster, o options) (table, error) {
	const (
		smallTokens = 16   // max_tokens of the small requests
		largeTokens = 1600 // 100× the small ones
		teamTPM     = 240_000
		workers     = 48 // closed-loop requests in flight per member
	)
	heavy, err := c.memberInTier(ctx, "heavy@loadtest.dev", weighted("heavy", 8))
	if err != nil {
		return table{}, err
	}
	light, err := c.memberInTier(ctx, "light@loadtest.dev", weighted("light", 1))
	if err != nil {
		return table{}, err
	}
	big, err := c.memberInTier(ctx, "large@loadtest.dev", weighted("large", 1))
	if err != nil {
		return table{}, err
	}
	primer, err := c.memberInTier(ctx, "primer@loadtest.dev", weighted("primer", 1))
	if err != nil {
		return table{}, err
	}
	if _, err := c.Store.SetTeamLimits(ctx, store.ActorCLI, c.TeamID, store.Limits{TokensPerMinute: teamTPM, RatePeriod: time.Second}); err != nil {
		return table{}, err
	}
	if err := c.startReplicas(ctx, replicas, true, []string{"FAIR_QUEUE_WAIT=" + fairWait.String()}); err != nil {
		return table{}, err
	}
	defer c.stopReplicas()
	client := newLoadClient()
	// The team's TPM bucket starts full (a minute's tokens): until it is spent
	// nothing is scarce and both are served as fast as they ask. A fourth
	// member spends nearly all of it first (in requests the model's max_tokens
	// allows), so the team limit binds from the start.
	const primeTokens = 59_000
	for range teamTPM / primeTokens {
		if a := send(client, c.Replicas[0], primer, primeTokens); a.err != nil || a.status != http.StatusOK {
			return table{}, fmt.Errorf("a request spending the team's bucket: status %d, %v", a.status, a.err)
		}
	}
	th, tl, tb := newTally("heavy (weight 8)"), newTally("light (weight 1)"), newTally("large requests (weight 1)")
	countBetween(time.Now().Add(time.Hour), time.Time{}, th, tl, tb) // nothing until the room fills
	// The measured run starts once a request has waited in the room, and lasts
	// o.fairDuration.
	var once sync.Once
	scarce, stop := make(chan struct{}), make(chan struct{})
	queued := func() { once.Do(func() { close(scarce) }) }
	var wg sync.WaitGroup
	wg.Go(func() { closedLoop(client, c.Replicas, heavy, smallTokens, workers, stop, th, queued) })
	wg.Go(func() { closedLoop(client, c.Replicas, light, smallTokens, workers, stop, tl, queued) })
	warmUp := time.Now()
	select {
	case <-scarce:
	case <-time.After(2 * time.Minute):
	}
	from := time.Now()
	countBetween(from, from.Add(o.fairDuration), th, tl, tb)
	wg.Go(func() {
		// One every 5 s, the first once the room has filled.
		for i := 0; time.Since(from) < o.fairDuration-5*time.Second; i++ {
			time.Sleep(5 * time.Second)
			tb.add(send(client, c.Replicas[i%len(c.Replicas)], big, largeTokens))
		}
	})
	time.Sleep(o.fairDuration)
	close(stop)
	wg.Wait()
	warm := from.Sub(warmUp)

	t := table{
		Title: fmt.Sprintf("Fair: weights 8 and 1 behind a team TPM of %d, each member with %d requests of max_tokens %d in flight, %s over %d replicas (FAIR_QUEUE_WAIT %s)",
			teamTPM, workers, smallTokens, o.fairDuration, replicas, fairWait),
		Columns: []string{"member", "sent", "200", "429", "other", "transport errors", "admitted tokens", "tokens/min", "p99 queued", "p99 latency"},
		Raw:     []*tally{th, tl, tb},
	}
	for _, m := range []*tally{th, tl, tb} {
		other := m.Sent - m.Errors - m.Codes[http.StatusOK] - m.Codes[http.StatusTooManyRequests]
		t.Rows = append(t.Rows, []string{m.Name, strconv.Itoa(m.Sent), strconv.Itoa(m.Codes[http.StatusOK]),
			strconv.Itoa(m.Codes[http.StatusTooManyRequests]), strconv.Itoa(other), strconv.Itoa(m.Errors),
			strconv.FormatInt(m.Tokens, 10), fmt.Sprintf("%.0f", float64(m.Tokens)/o.fairDuration.Minutes()), ms(p99(m.Waits)), ms(p99(m.Took))})
	}
	ratio := float64(th.Tokens) / float64(max(tl.Tokens, 1))
	verdict := "PASS"
	if ratio < 8*0.9 || ratio > 8*1.1 {
		verdict = "FAIL"
	}
	t.Notes = append(t.Notes, fmt.Sprintf("counted from the first request that waited in the room, %s after the load began (after a fourth member spent the team's bucket); only answers within the run are counted",
		warm.Round(100*time.Millisecond)))
	t.Notes = append(t.Notes, fmt.Sprintf("%s: admitted tokens heavy : light = %.2f : 1 (target 8 within 10%%: 7.20 to 8.80); together %.0f tokens/min against the team's %d",
		verdict, ratio, float64(th.Tokens+tl.Tokens+tb.Tokens)/o.fairDuration.Minutes(), teamTPM))
	var waits []string
	for i := range tb.Waits {
		waits = append(waits, fmt.Sprintf("%d ms (answered in %s)", tb.Waits[i].Milliseconds(), ms(tb.Took[i])))
	}
	verdict = "PASS"
	if tb.Codes[http.StatusOK] != tb.Sent || tb.Sent == 0 {
		verdict = "FAIL"
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%s: large requests (max_tokens %d, %d× the small ones) admitted %d of %d while %d small ones were admitted; waits: %s",
		verdict, largeTokens, largeTokens/smallTokens, tb.Codes[http.StatusOK], tb.Sent, th.Codes[http.StatusOK]+tl.Codes[http.StatusOK], strings.Join(waits, ", ")))
	return t, nil
}

// runaway: four members offering their fair share of the team's rate limit
// each, and a fifth offering 50× its share, in rounds with and without the
// runaway, alternating, in one invocation. The four's admitted rate and p99
// wait must be within 10% of the rounds without the runaway.
func runaway(ctx context.Context, c *cluster, o options) (table, error) {
	const (
		teamRate = 20 // requests a second, the team's (token bucket, burst 20)
		members  = 5
		share    = teamRate / members
		rounds   = 4 // alternating: without, with, without, with
	)
	keys, err := c.members(ctx, "member", members)
	if err != nil {
		return table{}, err
	}
	if _, err := c.Store.SetTeamLimits(ctx, store.ActorCLI, c.TeamID, store.Limits{RateLimit: teamRate, RatePeriod: time.Second}); err != nil {
		return table{}, err
	}
	if err := c.startReplicas(ctx, replicas, true, []string{"FAIR_QUEUE_WAIT=" + fairWait.String()}); err != nil {
		return table{}, err
	}
	defer c.stopReplicas()
	client := newLoadClient()
	round := o.fairDuration / rounds
	normal := [2]*tally{newTally("4 normal members, without the runaway"), newTally("4 normal members, beside the runaway")}
	run := newTally("runaway member")
	for r := range rounds {
		with := r%2 == 1
		var wg sync.WaitGroup
		for _, key := range keys[:members-1] {
			wg.Go(func() { openLoop(client, c.Replicas, key, 16, share, round, normal[r%2]) })
		}
		if with {
			wg.Go(func() { openLoop(client, c.Replicas, keys[members-1], 16, 50*share, round, run) })
		}
		wg.Wait()
		// The room and bucket settle before the next round.
		time.Sleep(fairWait + time.Second)
	}
	secs := (round * rounds / 2).Seconds()
	t := table{
		Title: fmt.Sprintf("Runaway: 4 members at %d req/s each (their share of a team rate limit of %d req/s) and one at %d req/s, %d alternating rounds of %s over %d replicas (FAIR_QUEUE_WAIT %s)",
			share, teamRate, 50*share, rounds, round, replicas, fairWait),
		Columns: []string{"who", "sent", "200", "200/s per member", "429", "other", "p50 queued", "p99 queued", "p99 latency"},
		Raw:     []*tally{normal[0], normal[1], run},
	}
	rate := func(m *tally, n int) float64 { return float64(m.Codes[http.StatusOK]) / secs / float64(n) }
	for i, m := range []*tally{normal[0], normal[1], run} {
		n := members - 1
		if i == 2 {
			n = 1
		}
		waits := slices.Clone(m.Waits)
		slices.Sort(waits)
		p50 := time.Duration(0)
		if len(waits) > 0 {
			p50 = waits[len(waits)/2]
		}
		other := m.Sent - m.Codes[http.StatusOK] - m.Codes[http.StatusTooManyRequests]
		t.Rows = append(t.Rows, []string{m.Name, strconv.Itoa(m.Sent), strconv.Itoa(m.Codes[http.StatusOK]), fmt.Sprintf("%.2f", rate(m, n)),
			strconv.Itoa(m.Codes[http.StatusTooManyRequests]), strconv.Itoa(other), ms(p50), ms(p99(m.Waits)), ms(p99(m.Took))})
	}
	// The admitted rate must be within 10% either way; a wait or latency only
	// fails when it is more than 10% longer beside the runaway.
	within := func(what string, without, with float64, unit string, twoSided bool) string {
		v, target := "PASS", "within 10%"
		if !twoSided {
			target = "at most 10% above"
		}
		if with > without*1.1 || (twoSided && with < without*0.9) {
			v = "FAIL"
		}
		return fmt.Sprintf("%s: normal members' %s %.2f%s beside the runaway vs %.2f%s without (target %s)", v, what, with, unit, without, unit, target)
	}
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t.Notes = append(t.Notes,
		within("admitted rate", rate(normal[0], members-1), rate(normal[1], members-1), " req/s", true),
		within("p99 queued (X-Tollgate-Queued-Ms)", msf(p99(normal[0].Waits)), msf(p99(normal[1].Waits)), " ms", false),
		within("p99 latency", msf(p99(normal[0].Took)), msf(p99(normal[1].Took)), " ms", false),
		fmt.Sprintf("the runaway was admitted %.2f req/s (its share: %d)", rate(run, 1), share))
	return t, nil
}
