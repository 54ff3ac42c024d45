package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/store"
)

// trial is one change and how long every replica took to enforce it.
type trial struct {
	Call     time.Duration `json:"store_call_ns"` // the store call: transaction, commit and Redis mirror write
	Enforced time.Duration `json:"enforced_ns"`   // from the call's start to the last replica's first enforcing answer
	NotYet   int           `json:"not_yet"`       // answers after the call returned that did not enforce it yet
	TimedOut bool          `json:"timed_out"`
}

type propagationRaw struct {
	Change string  `json:"change"`
	Trials []trial `json:"trials"`
}

// propagation commits a revoke, a cut-off and a limit change through app/store
// as the CLI does (with the Redis mirror), then polls all 3 replicas with
// requests until each enforces it.
func propagation(ctx context.Context, c *cluster, o options) (table, error) {
	env := map[string]string{"DATABASE_URL": c.dbURL, "REDIS_URL": c.redisURL, "REDIS_KEY_PREFIX": c.prefix,
		"GATEWAY_REPLICAS": strconv.Itoa(replicas)}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		return table{}, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lim, closeLimiter, err := app.NewLimiter(ctx, cfg, log)
	if err != nil {
		return table{}, err
	}
	defer closeLimiter()
	st := c.Store.WithMirror(lim, log)

	limits := func(rate int64) store.Limits {
		return store.Limits{RateAlgorithm: "token_bucket", RateLimit: rate, RatePeriod: time.Second}
	}
	memberFor := func(email string) (store.Member, error) {
		m, err := st.AddMember(ctx, store.ActorCLI, c.TeamID, email, store.RoleMember)
		if err != nil {
			return m, err
		}
		_, err = st.SetMemberLimits(ctx, store.ActorCLI, c.TeamID, m.ID, limits(100_000))
		return m, err
	}
	revokee, err := memberFor("revoke@loadtest.dev")
	if err != nil {
		return table{}, err
	}
	cutee, err := memberFor("cutoff@loadtest.dev")
	if err != nil {
		return table{}, err
	}
	cutKey, err := st.IssueKey(ctx, store.ActorCLI, c.TeamID, cutee.ID, "loadtest")
	if err != nil {
		return table{}, err
	}
	limitee, err := memberFor("limits@loadtest.dev")
	if err != nil {
		return table{}, err
	}
	limitKey, err := st.IssueKey(ctx, store.ActorCLI, c.TeamID, limitee.ID, "loadtest")
	if err != nil {
		return table{}, err
	}
	if err := c.startReplicas(ctx, replicas, true, nil); err != nil {
		return table{}, err
	}
	defer c.stopReplicas()
	p := newPoller(c.Replicas)
	status := func(code int) func(*http.Response) bool {
		return func(r *http.Response) bool { return r.StatusCode == code }
	}

	revoke := propagationRaw{Change: "revoke a key"}
	cutOff := propagationRaw{Change: "cut a member off"}
	limit := propagationRaw{Change: "change a rate limit"}
	for i := range o.trials {
		if ctx.Err() != nil {
			return table{}, ctx.Err()
		}
		// Revoke: a fresh key, live on every replica, then revoked.
		k, err := st.IssueKey(ctx, store.ActorCLI, c.TeamID, revokee.ID, "trial-"+strconv.Itoa(i))
		if err != nil {
			return table{}, err
		}
		if _, err := p.until(k.Plaintext, status(http.StatusOK), 10*time.Second); err != nil {
			return table{}, fmt.Errorf("new key not live on every replica: %w", err)
		}
		revoke.Trials = append(revoke.Trials, p.measure(k.Plaintext, status(http.StatusUnauthorized), func() error {
			_, err := st.RevokeKey(ctx, store.ActorCLI, c.TeamID, k.ID)
			return err
		}))

		// Cut-off: the member served everywhere, then disabled, then restored.
		if _, err := p.until(cutKey.Plaintext, status(http.StatusOK), 10*time.Second); err != nil {
			return table{}, fmt.Errorf("restored member not served on every replica: %w", err)
		}
		cutOff.Trials = append(cutOff.Trials, p.measure(cutKey.Plaintext, status(http.StatusForbidden), func() error {
			_, err := st.SetMemberStatus(ctx, store.ActorCLI, c.TeamID, cutee.ID, store.StatusDisabled)
			return err
		}))
		if _, err := st.SetMemberStatus(ctx, store.ActorCLI, c.TeamID, cutee.ID, store.StatusActive); err != nil {
			return table{}, err
		}

		// Limit change: a new rate limit each trial, seen in X-RateLimit-Limit.
		want := strconv.Itoa(50_000 + i)
		limit.Trials = append(limit.Trials, p.measure(limitKey.Plaintext, func(r *http.Response) bool {
			return r.Header.Get("X-RateLimit-Limit") == want
		}, func() error {
			_, err := st.SetMemberLimits(ctx, store.ActorCLI, c.TeamID, limitee.ID, limits(int64(50_000+i)))
			return err
		}))
	}

	t := table{
		Title: fmt.Sprintf("Propagation: a change committed through app/store (Redis mirror on, as the CLI) until all %d replicas enforce it, %d trials each", replicas, o.trials),
		Columns: []string{"change", "trials", "store call p50", "enforced on all p50", "p99", "max", "answers after the call returned that did not enforce it",
			"timed out (10 s)"},
		Raw: []propagationRaw{revoke, cutOff, limit},
	}
	for _, r := range t.Raw.([]propagationRaw) {
		var calls, enforced []time.Duration
		notYet, timedOut := 0, 0
		for _, tr := range r.Trials {
			calls, enforced = append(calls, tr.Call), append(enforced, tr.Enforced)
			notYet += tr.NotYet
			if tr.TimedOut {
				timedOut++
			}
		}
		t.Rows = append(t.Rows, []string{r.Change, strconv.Itoa(len(r.Trials)), ms(quantile(calls, 0.5)), ms(quantile(enforced, 0.5)),
			ms(quantile(enforced, 0.99)), ms(quantile(enforced, 1)), strconv.Itoa(notYet), strconv.Itoa(timedOut)})
		switch r.Change {
		case limit.Change:
			p99 := quantile(enforced, 0.99)
			t.Notes = append(t.Notes, fmt.Sprintf("limit change enforced on all replicas within %s p99 (target ≤ 1 s: %s)", ms(p99), metOrMissed(p99 <= time.Second && timedOut == 0, p99-time.Second)))
		default:
			verdict := "met"
			if notYet > 0 || timedOut > 0 {
				verdict = fmt.Sprintf("missed: %d answers served after the call returned", notYet)
			}
			t.Notes = append(t.Notes, fmt.Sprintf("%s refused on every replica at the next request (target): %s", r.Change, verdict))
		}
	}
	t.Notes = append(t.Notes,
		"each replica is polled back-to-back with GET /anthropic/v1/models once the store call returns; enforced = from the call's start (so it includes the transaction and the Redis mirror write) to the last replica's first refusal (401 revoked, 403 cut off) or first X-RateLimit-Limit showing the new limit",
		"revoke and cut-off bind through the Redis mirror checked inside ADMIT; a limit change reaches replicas by snapshot reload (LISTEN/NOTIFY)")
	return t, nil
}

// poller sends requests to every replica with a keep-alive client each.
type poller struct {
	replicas []string
	clients  []*http.Client
}

func newPoller(replicas []string) *poller {
	p := &poller{replicas: replicas}
	for range replicas {
		p.clients = append(p.clients, &http.Client{Timeout: 5 * time.Second})
	}
	return p
}

// measure runs change, then polls until every replica's answer satisfies done.
func (p *poller) measure(key string, done func(*http.Response) bool, change func() error) trial {
	start := time.Now()
	if err := change(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: propagation: change failed:", err)
		return trial{TimedOut: true}
	}
	tr := trial{Call: time.Since(start)}
	notYet, err := p.until(key, done, 10*time.Second)
	tr.Enforced, tr.NotYet, tr.TimedOut = time.Since(start), notYet, err != nil
	return tr
}

// until polls every replica at once, each back-to-back, until done holds for
// its answer; it returns how many answers did not satisfy done yet.
func (p *poller) until(key string, done func(*http.Response) bool, timeout time.Duration) (int, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	notYet := 0
	var firstErr error
	deadline := time.Now().Add(timeout)
	for i, base := range p.replicas {
		wg.Go(func() {
			for {
				req, _ := http.NewRequest(http.MethodGet, base+"/anthropic/v1/models", nil)
				req.Header.Set("X-Api-Key", key)
				req.Header.Set("Anthropic-Version", "2023-06-01")
				resp, err := p.clients[i].Do(req)
				ok := false
				if err == nil {
					ok = done(resp)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if ok {
					return
				}
				mu.Lock()
				notYet++
				mu.Unlock()
				if time.Now().After(deadline) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s not done after %s (last error %v)", base, timeout, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return notYet, firstErr
}

// quantile is the q-th quantile (nearest rank) of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
