package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/store"
)

// idle measures what one gateway costs its Redis and Postgres when nobody
// sends a request: with 0, 1 and 10 owners' dashboards open (each a live
// event stream), for o.idleDuration each, and what one paid request costs, for
// the Cost section of docs/operations.md. It runs its own redis-server on a
// free port, since INFO commandstats counts every client of a server and the
// shared one has other users.
func idle(ctx context.Context, c *cluster, o options) (table, error) {
	t := table{
		Title: fmt.Sprintf("Idle: Redis commands a gateway sends with no traffic, %s per level, one replica", o.idleDuration),
		Columns: []string{"phase", "dashboards open", "Redis commands", "per second", "per request", "Postgres commits", "Postgres rows written",
			"top commands"},
	}
	rdb, stopRedis, err := privateRedis(ctx)
	if err != nil {
		return t, err
	}
	defer stopRedis()
	shared := c.redisURL
	c.redisURL = "redis://" + rdb.Options().Addr + "/0"
	defer func() { c.redisURL = shared }()

	key, err := c.member(ctx, "idle-member@loadtest.dev", store.NoLimits())
	if err != nil {
		return t, err
	}
	if _, err := c.members(ctx, "idle-team", 5); err != nil { // a hackathon team of six
		return t, err
	}
	if err := c.startReplicas(ctx, 1, true, nil); err != nil {
		return t, err
	}
	base := c.Replicas[0]
	owner, err := c.ownerClient(ctx, base)
	if err != nil {
		return t, err
	}

	type phase struct {
		Name       string
		Dashboards int
		Requests   int
		Seconds    float64
		Commands   map[string]int64
		Commits    int64
		Rows       int64
	}
	var raw []phase
	row := func(p phase) {
		total := sum(p.Commands)
		perReq := "—"
		if p.Requests > 0 {
			perReq = fmt.Sprintf("%.1f", float64(total)/float64(p.Requests))
		}
		t.Rows = append(t.Rows, []string{p.Name, strconv.Itoa(p.Dashboards), strconv.FormatInt(total, 10),
			fmt.Sprintf("%.2f", float64(total)/p.Seconds), perReq, strconv.FormatInt(p.Commits, 10), strconv.FormatInt(p.Rows, 10),
			top(p.Commands, 4)})
		raw = append(raw, p)
	}
	measure := func(name string, dashboards int, during time.Duration, work func() int) error {
		sctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range dashboards {
			wg.Go(func() { holdStream(sctx, owner, base+"/console/dashboard/live") })
		}
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(3 * time.Second) // streams open, their first reads done
		before, err := commandStats(ctx, rdb)
		if err != nil {
			return err
		}
		pgBefore, err := c.pgWrites(ctx)
		if err != nil {
			return err
		}
		began := time.Now()
		requests := 0
		if work != nil {
			requests = work()
		}
		select {
		case <-time.After(during - time.Since(began)):
		case <-ctx.Done():
			return ctx.Err()
		}
		after, err := commandStats(ctx, rdb)
		if err != nil {
			return err
		}
		secs := time.Since(began).Seconds()
		time.Sleep(time.Second) // Postgres publishes its counters about once a second
		pgAfter, err := c.pgWrites(ctx)
		if err != nil {
			return err
		}
		p := phase{Name: name, Dashboards: dashboards, Requests: requests, Seconds: secs, Commands: map[string]int64{},
			Commits: pgAfter[0] - pgBefore[0], Rows: pgAfter[1] - pgBefore[1]}
		for cmd, n := range after {
			if d := n - before[cmd]; d > 0 && cmd != "info" {
				p.Commands[cmd] = d
			}
		}
		row(p)
		return nil
	}

	// Some traffic first, so the dashboard has an hour with figures in it; then
	// a minute for the live counters to settle and the loops to go quiet.
	const paid = 200
	client := &http.Client{Timeout: 30 * time.Second}
	sendPaid := func() int {
		for range paid {
			if a := send(client, base, key, 16); a.status != http.StatusOK {
				return 0
			}
		}
		return paid
	}
	if err := measure("paid requests, one at a time", 0, 10*time.Second, sendPaid); err != nil {
		return t, err
	}
	if last := raw[len(raw)-1]; last.Requests != paid {
		return t, errors.New("a paid request was refused")
	}
	time.Sleep(o.idleDuration / 2)
	for _, n := range []int{0, 1, 10} {
		if err := measure("idle", n, o.idleDuration, nil); err != nil {
			return t, err
		}
	}
	t.Raw = raw
	t.Notes = append(t.Notes,
		"Redis commands: INFO commandstats deltas on a redis-server of the scenario's own (INFO itself left out); per second over the phase",
		"paid requests: sent one after another, the phase lasting 10 s so the ledger and live counters flush within it; per request = every command of the phase / requests",
		"Postgres: pg_stat_database of the scenario's database, xact_commit and tup_inserted+tup_updated+tup_deleted (the console's session reads included)",
		"a dashboard is GET /console/dashboard/live as the team's owner, reconnected when the stream ends (every minute), as the browser does")
	return t, nil
}

// privateRedis starts a redis-server on a free loopback port, without
// persistence, and returns a client on it and a function that stops it.
func privateRedis(ctx context.Context) (*redis.Client, func(), error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("idle needs redis-server on PATH to count commands alone: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	stopIt := func() {
		rdb.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(ctx).Err() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			stopIt()
			return nil, nil, errors.New("redis-server did not come up")
		}
	}
	return rdb, stopIt, nil
}

// commandStats is INFO commandstats: calls per command.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		// cmdstat_hgetall:calls=12,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				calls[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls, nil
}

// pgWrites is the scenario database's commits and rows written so far.
func (c *cluster) pgWrites(ctx context.Context) ([2]int64, error) {
	var w [2]int64
	err := c.pool.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&w[0], &w[1])
	return w, err
}

// ownerClient makes an owner of the cluster's team through a one-time invite
// and signs them in, returning a client holding their session.
func (c *cluster) ownerClient(ctx context.Context, base string) (*http.Client, error) {
	const email, password = "idle-owner@loadtest.dev", "a long enough password for the loadtest"
	token, _, err := c.Store.CreateInvite(ctx, store.ActorCLI, c.TeamID, email, store.RoleOwner)
	if err != nil {
		return nil, err
	}
	if _, err := c.Store.AcceptInvite(ctx, token, password); err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := client.PostForm(base+"/console/signin", url.Values{"email": {email}, "password": {password}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("owner sign-in: %s", resp.Status)
	}
	return &http.Client{Jar: jar}, nil
}

// holdStream keeps an event stream open until ctx ends, reading and dropping
// its events and opening it again when it ends, as console.js does.
func holdStream(ctx context.Context, client *http.Client, streamURL string) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := client.Do(req)
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// top is the n commands sent most, "hmget 3480, hgetall 120".
func top(m map[string]int64, n int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return int(m[b] - m[a]) })
	var parts []string
	for _, k := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
