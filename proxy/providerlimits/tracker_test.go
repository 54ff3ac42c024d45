package providerlimits_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{now: received} }
func openAIHeaders(limit, remaining int, reset time.Duration) http.Header {
	return http.Header{"X-Ratelimit-Limit-Requests": {strconv.Itoa(limit)}, "X-Ratelimit-Remaining-Requests": {strconv.Itoa(remaining)},
		"X-Ratelimit-Reset-Requests": {reset.String()}}
}

var key = providerlimits.Key{ID: "https://api.example.com OPENAI_API_KEY", Upstream: "api.example.com", Credential: "OPENAI_API_KEY"}

// TestTrackerPacesToTheAccountRate: once the headers say the account has no
// requests left, requests are spaced at the rate they imply, each waiting its
// turn, and past MaxWait refused with the wait as Retry-After.
func TestTrackerPacesToTheAccountRate(t *testing.T) {
	t.Parallel()
	c := newClock()
	tr := providerlimits.New(providerlimits.Options{MaxWait: time.Second, Now: c.Now})
	if r := tr.Reserve(key); !r.OK || r.Wait != 0 {
		t.Fatalf("unknown account: %+v, want sent at once", r)
	}
	// 60 a minute, none left, full again in a minute: one a second.
	r := tr.Reserve(key)
	tr.Observe(key, r, c.Now(), http.StatusOK, openAIHeaders(60, 0, time.Minute))
	var waits []time.Duration
	for range 3 {
		r := tr.Reserve(key)
		if !r.OK {
			waits = append(waits, -r.RetryAfter)
			continue
		}
		waits = append(waits, r.Wait)
	}
	// 1s for the first, then 2s is past MaxWait: refused, and so is the next.
	if waits[0] != time.Second || waits[1] != -2*time.Second || waits[2] != -2*time.Second {
		t.Errorf("waits = %v, want [1s -2s -2s] (negative: refused with that Retry-After)", waits)
	}
	if tr.Room(key) {
		t.Error("Room with the account exhausted")
	}
	c.Add(2 * time.Second)
	if !tr.Room(key) {
		t.Error("no Room once the pace has refilled")
	}
	st := tr.Stats()
	if len(st) != 1 || st[0].RequestsRemaining != 0 || st[0].Held != 1 || st[0].Refused != 2 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestTrackerHoldsNoLongerThanMaxHold: a 429 asking for a day, or a pace of
// one request an hour, holds traffic for MaxHold at most; then requests go
// and learn again.
func TestTrackerHoldsNoLongerThanMaxHold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		h      http.Header
	}{
		{"RetryAfterADay", http.StatusTooManyRequests, http.Header{"Retry-After": {"86400"}}},
		{"OneAnHour", http.StatusOK, openAIHeaders(1, 0, 23*time.Hour)},
		{"TokensGoneForHours", http.StatusOK, http.Header{"Anthropic-Ratelimit-Tokens-Limit": {"1000"},
			"Anthropic-Ratelimit-Tokens-Remaining": {"0"}, "Anthropic-Ratelimit-Tokens-Reset": {received.Add(20 * time.Hour).Format(time.RFC3339)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			tr := providerlimits.New(providerlimits.Options{MaxHold: time.Minute, Now: c.Now})
			tr.Observe(key, providerlimits.Reservation{}, c.Now(), tt.status, tt.h)
			r := tr.Reserve(key)
			if r.OK || r.RetryAfter > time.Minute || r.RetryAfter < 30*time.Second {
				t.Fatalf("after the answer: %+v, want refused with a Retry-After of at most a minute", r)
			}
			c.Add(time.Minute + time.Millisecond)
			if r := tr.Reserve(key); !r.OK || r.Wait != 0 {
				t.Errorf("a minute later: %+v, want sent at once", r)
			}
		})
	}
}

// TestTrackerIgnoresHostileHeaders: headers that do not parse change nothing.
func TestTrackerIgnoresHostileHeaders(t *testing.T) {
	t.Parallel()
	c := newClock()
	tr := providerlimits.New(providerlimits.Options{Now: c.Now})
	tr.Observe(key, providerlimits.Reservation{}, c.Now(), http.StatusOK, readHeaders(t, "testdata/hostile.headers"))
	tr.Observe(key, providerlimits.Reservation{}, c.Now(), http.StatusOK, openAIHeaders(10, 11, time.Second))
	tr.Observe(key, providerlimits.Reservation{}, c.Now(), http.StatusOK, http.Header{"X-Ratelimit-Limit-Requests": {"5"},
		"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"-1s"}})
	for i := range 100 {
		if r := tr.Reserve(key); !r.OK || r.Wait != 0 {
			t.Fatalf("request %d: %+v, want sent at once", i, r)
		}
	}
}

// TestTrackerSharesThroughRedis: a 429 one replica got holds the other
// replica's requests to that target once the background sync has run, though
// the other never sent it anything; another target stays open.
func TestTrackerSharesThroughRedis(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	other := providerlimits.Key{ID: "https://api.example.com OPENAI_API_KEY_2", Upstream: "api.example.com", Credential: "OPENAI_API_KEY_2"}
	keys := func() []providerlimits.Key { return []providerlimits.Key{key, other} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var trackers []*providerlimits.Tracker
	for range 2 {
		tr := providerlimits.New(providerlimits.Options{MaxWait: -1}).Share(rdb, providerlimits.ShareOptions{Prefix: prefix, Interval: 10 * time.Millisecond})
		go tr.Run(ctx, keys)
		trackers = append(trackers, tr)
	}
	a, b := trackers[0], trackers[1]
	a.Observe(key, providerlimits.Reservation{}, a.Now(), http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}})
	deadline := time.Now().Add(5 * time.Second)
	for b.Room(key) {
		if time.Now().After(deadline) {
			t.Fatal("replica B still sends to the target A found exhausted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := b.Reserve(key); r.OK || r.RetryAfter < 25*time.Second {
		t.Errorf("B's reservation = %+v, want refused for about 30s", r)
	}
	if !b.Room(other) {
		t.Error("B holds the other target too")
	}
}

// commandCounter counts the commands a Redis client sends, pipelined or not.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestTrackerIdleSendsNothing: a replica with no requests sends Redis
// nothing, though another replica learns of a 429 meanwhile; its first
// request wakes it, and the 429 binds its requests right after.
func TestTrackerIdleSendsNothing(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	keys := func() []providerlimits.Key { return []providerlimits.Key{key} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := providerlimits.ShareOptions{Prefix: prefix, Interval: 10 * time.Millisecond, IdleAfter: 50 * time.Millisecond}
	a := providerlimits.New(providerlimits.Options{MaxWait: -1}).Share(redistest.Client(t), o)
	idleRDB := redistest.Client(t)
	var cmds commandCounter
	idleRDB.AddHook(&cmds)
	b := providerlimits.New(providerlimits.Options{MaxWait: -1}).Share(idleRDB, o)
	go a.Run(ctx, keys)
	go b.Run(ctx, keys)

	a.Observe(key, providerlimits.Reservation{}, a.Now(), http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}})
	time.Sleep(300 * time.Millisecond) // 30 intervals
	if n := cmds.n.Load(); n != 0 {
		t.Errorf("an idle replica sent %d Redis commands in 30 intervals, want none", n)
	}
	b.Room(key) // the first request after the quiet wakes it
	deadline := time.Now().Add(5 * time.Second)
	for b.Room(key) {
		if time.Now().After(deadline) {
			t.Fatal("after waking, replica B still sends to the target A found exhausted")
		}
		time.Sleep(time.Millisecond)
	}
}
