package limiter_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
)

// redisServer is a redis-server of the test's own, on a free loopback port, so the
// test can kill and pause it without touching the shared Redis.
type redisServer struct {
	t    *testing.T
	port string
	cmd  *exec.Cmd
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	s := &redisServer{t: t, port: port}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + s.port }

func (s *redisServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", s.port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer", s.addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies only once resumed
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *redisServer) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// TestRedisOutage stops Redis under the limiter: fail-closed refuses as unavailable
// within the timeout, fail-open admits each replica's share, a paused (slow) Redis
// still answers within the timeout, and a restarted Redis is exact again.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const timeout, replicas, limit = 200 * time.Millisecond, 3, 9
	// Scheduling slack on two shared cores under -race; the bound itself is the timeout.
	const slack = 300 * time.Millisecond
	srv := startRedisServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
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

	srv.kill()
	unavailable("ada")
	// Each of these waits out the timeout: go-redis retries the dial until the deadline.
	allowed, degraded := count("bob", true, 8)
	if allowed != limit/replicas || degraded != 8 {
		t.Fatalf("fail-open: %d allowed, %d degraded of 8; want %d allowed, all degraded", allowed, degraded, limit/replicas)
	}
	if s := l.Stats(); s.FailClosed != 1 || s.FailOpenAllowed != limit/replicas || s.FailOpenRefused != 8-limit/replicas {
		t.Fatalf("stats %+v", s)
	}
	if err := l.Release(context.Background(), "team", "bob", "any"); err == nil {
		t.Fatal("release with Redis down: no error")
	}

	srv.start()
	allowed, degraded = count("cy", false, 20)
	if allowed != limit || degraded != 0 {
		t.Fatalf("after restart: %d allowed, %d degraded of 20; want exactly %d by Redis", allowed, degraded, limit)
	}

	// A paused Redis accepts connections and never answers: the slow case.
	srv.signal(syscall.SIGSTOP)
	unavailable("dee")
	start := time.Now()
	err := l.SetKeyRevoked(context.Background(), "team", "k", true)
	if took := time.Since(start); err == nil || took > timeout+slack {
		t.Fatalf("revoke on paused Redis: %v after %s; want an error within %s", err, took, timeout)
	}
	srv.signal(syscall.SIGCONT)
}
