package console

import (
	"sync"
	"time"
)

// throttle counts failed sign-ins per key (an account or an address) in a
// sliding window: a key with limit failures inside the window is refused until
// the oldest of them leaves it.
//
// It is in-process, so with N replicas an attacker gets up to N times the
// limit. That is acceptable for now; it moves to the shared Redis limiter
// (package limiter) once that lands, which makes the limit exact across replicas.
type throttle struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu       sync.Mutex
	failures map[string][]time.Time // oldest first, at most limit entries
}

// maxThrottleKeys bounds memory under a spray of distinct emails or addresses.
const maxThrottleKeys = 100_000

func newThrottle(limit int, window time.Duration) *throttle {
	return &throttle{limit: limit, window: window, now: time.Now, failures: map[string][]time.Time{}}
}

// retryAfter is how long key must wait before its next attempt; zero if it may
// try now.
func (t *throttle) retryAfter(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	recent := t.recent(key, now)
	if len(recent) < t.limit {
		return 0
	}
	return recent[0].Add(t.window).Sub(now)
}

// fail records a failed attempt by key.
func (t *throttle) fail(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	recent := t.recent(key, now)
	if recent == nil && len(t.failures) >= maxThrottleKeys {
		t.sweep(now)
	}
	if len(recent) == t.limit {
		recent = recent[1:]
	}
	t.failures[key] = append(recent, now)
}

// reset forgets key's failures, after it signs in.
func (t *throttle) reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, key)
}

// recent returns key's failures still inside the window.
func (t *throttle) recent(key string, now time.Time) []time.Time {
	times := t.failures[key]
	for len(times) > 0 && !now.Before(times[0].Add(t.window)) {
		times = times[1:]
	}
	if len(times) == 0 {
		delete(t.failures, key)
		return nil
	}
	return times
}

// sweep drops keys whose failures have all left the window. If every key is
// still live, it drops arbitrary ones: forgetting some failures is better than
// unbounded memory, and the per-address limit still slows a spray.
func (t *throttle) sweep(now time.Time) {
	for key := range t.failures {
		if t.recent(key, now) == nil || len(t.failures) >= maxThrottleKeys {
			delete(t.failures, key)
		}
	}
}
