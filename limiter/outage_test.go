package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestRedisOutage stops Redis under the limiter: fail-closed refuses as unavailable
// within the timeout, fail-open admits each replica's share (but a budget request
// always fails closed), a paused (slow) Redis
// still answers within the timeout, and a restarted Redis is exact again.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const timeout, replicas, limit = 200 * time.Millisecond, 3, 9
	// Scheduling slack on two shared cores under -race; the bound itself is the timeout.
	const slack = 300 * time.Millisecond
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: "outage:", Timeout: timeout, Replicas: replicas})
	request := func(member string, failOpen bool) limiter.Request {
		return limiter.Request{Team: "team", Member: member, RequestID: rid(), FailOpen: failOpen, Lease: time.Hour,
			MemberPolicy: limiter.Policy{Rate: tokenBucket(limit, 24*time.Hour, 0), Concurrency: 100}}
	}
	// count admits n requests and returns how many were allowed and how many degraded.
	count := func(member string, failOpen bool, n int) (allowed, degraded int) {
		for range n {
			d, err := l.Admit(context.Background(), request(member, failOpen))
			if err != nil {
				t.Fatalf("%s: %v", member, err)
			}
			if d.Allowed {
				allowed++
			}
			if d.Degraded {
				degraded++
			}
		}
		return allowed, degraded
	}
	unavailable := func(member string) {
		t.Helper()
		start := time.Now()
		d, err := l.Admit(context.Background(), request(member, false))
		if took := time.Since(start); took > timeout+slack {
			t.Errorf("fail-closed admit took %s, bound %s", took, timeout)
		}
		if err == nil || d.Allowed || d.Reason != limiter.ReasonUnavailable || d.RetryAfter <= 0 {
			t.Fatalf("fail-closed: %+v, %v; want refused as unavailable with an error", d, err)
		}
	}

	if a, _ := count("before", false, 1); a != 1 {
		t.Fatal("healthy Redis refused")
	}

	srv.Kill()
	unavailable("ada")
	// Spend cannot be checked without Redis: a budget request fails closed even when
	// its route fails open.
	paid := request("eve", true)
	paid.MemberPolicy.Budget, paid.Hold = budget(dollar, limiter.PeriodDaily), 1
	if d, err := l.Admit(context.Background(), paid); err == nil || d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("fail-open budget request with Redis down: %+v, %v; want refused as unavailable", d, err)
	}
	// Each of these waits out the timeout: go-redis retries the dial until the deadline.
	allowed, degraded := count("bob", true, 8)
	if allowed != limit/replicas || degraded != 8 {
		t.Fatalf("fail-open: %d allowed, %d degraded of 8; want %d allowed, all degraded", allowed, degraded, limit/replicas)
	}
	if s := l.Stats(); s.FailClosed != 2 || s.FailOpenAllowed != limit/replicas || s.FailOpenRefused != 8-limit/replicas {
		t.Fatalf("stats %+v", s)
	}
	if err := release(context.Background(), l, "team", "bob", "any"); err == nil {
		t.Fatal("settle with Redis down: no error")
	}

	srv.Start()
	allowed, degraded = count("cy", false, 20)
	if allowed != limit || degraded != 0 {
		t.Fatalf("after restart: %d allowed, %d degraded of 20; want exactly %d by Redis", allowed, degraded, limit)
	}

	// A paused Redis accepts connections and never answers: the slow case.
	srv.Pause()
	unavailable("dee")
	start := time.Now()
	err := l.SetKeyRevoked(context.Background(), "team", "k", true)
	if took := time.Since(start); err == nil || took > timeout+slack {
		t.Fatalf("revoke on paused Redis: %v after %s; want an error within %s", err, took, timeout)
	}
	srv.Resume()
}

// TestAdmitPastTimeout: an admission that Redis runs only after the caller
// gave up (a paused Redis) is refused as unavailable within the timeout and
// leaves no slot, hold or TPM reservation behind: it is settled for nothing
// once Redis answers again.
func TestAdmitPastTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: "late:", Timeout: timeout})
	request := func() limiter.Request {
		return limiter.Request{Team: "team", Member: "ada", RequestID: rid(), Lease: time.Hour, Hold: 5, Tokens: 10,
			MemberPolicy: limiter.Policy{Concurrency: 1, TokensPerMinute: 10, Budget: budget(5, limiter.PeriodTotal)}}
	}
	rebuildEmpty(t, l, "team", nil)
	first := request()
	d := admit(t, l, first)
	settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: first.RequestID, Epoch: d.Epoch})

	srv.Pause()
	d, err := l.Admit(context.Background(), request())
	if err == nil || d.Allowed || d.Reason != limiter.ReasonUnavailable {
		t.Fatalf("admit on paused Redis: %+v, %v; want unavailable", d, err)
	}
	time.Sleep(2 * timeout)
	srv.Resume()
	// The late admission took the one slot, the whole budget and every TPM token;
	// once it is released the next request gets all three.
	deadline := time.Now().Add(5 * time.Second)
	for {
		next := request()
		d, err = l.Admit(context.Background(), next)
		if err == nil && d.Allowed {
			settle(t, l, limiter.Settlement{Team: "team", Member: "ada", RequestID: next.RequestID, Epoch: d.Epoch})
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis answered again: %+v, %v; the late admission was not released", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
