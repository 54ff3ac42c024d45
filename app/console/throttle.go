package console

import (
	"context"
	"sync"
	"time"
)

// throttle counts sign-in attempts per key (an account or an address) in a
// sliding window. An attempt takes its slot before the password is checked,
// so concurrent guesses cannot all pass a check made before any of them is
// counted; a sign-in that succeeds gives its slots back.
type throttle interface {
	// Take reserves attempt id under every bucket, all or none. When a bucket
	// already holds its limit of attempts inside the window nothing is taken,
	// and the wait until its oldest attempt leaves the window is returned.
	Take(ctx context.Context, id string, buckets ...bucket) (time.Duration, error)
	// Wait is what Take would return, without taking anything.
	Wait(ctx context.Context, buckets ...bucket) (time.Duration, error)
	// Release gives attempt id back under keys.
	Release(ctx context.Context, id string, keys ...string) error
	// Reset forgets every attempt under key.
	Reset(ctx context.Context, key string) error
}

// bucket is one key's share of an attempt and the most attempts it may hold
// inside the window.
type bucket struct {
	Key   string
	Limit int
}

// localThrottle is the in-process throttle, for a single replica without
// Redis: with N replicas each would grant its own limit.
type localThrottle struct {
	window time.Duration
	now    func() time.Time

	mu       sync.Mutex
	attempts map[string][]attempt // oldest first, at most the key's limit
}

type attempt struct {
	id string
	at time.Time
}

// maxThrottleKeys bounds memory under a spray of distinct emails or addresses.
const maxThrottleKeys = 100_000

// newLocalThrottle returns an in-process throttle over window.
func newLocalThrottle(window time.Duration) *localThrottle {
	return &localThrottle{window: window, now: time.Now, attempts: map[string][]attempt{}}
}

// Take implements throttle under one lock, so the check and the reservation
// cannot be split by another attempt.
func (t *localThrottle) Take(_ context.Context, id string, buckets ...bucket) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if wait := t.wait(now, buckets); wait > 0 {
		return wait, nil
	}
	for _, b := range buckets {
		recent := t.recent(b.Key, now)
		if recent == nil && len(t.attempts) >= maxThrottleKeys {
			t.sweep(now)
		}
		t.attempts[b.Key] = append(recent, attempt{id: id, at: now})
	}
	return 0, nil
}

// Wait implements throttle.
func (t *localThrottle) Wait(_ context.Context, buckets ...bucket) (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wait(t.now(), buckets), nil
}

func (t *localThrottle) wait(now time.Time, buckets []bucket) time.Duration {
	var wait time.Duration
	for _, b := range buckets {
		if recent := t.recent(b.Key, now); len(recent) >= b.Limit {
			wait = max(wait, recent[len(recent)-b.Limit].at.Add(t.window).Sub(now))
		}
	}
	return wait
}

// Release implements throttle.
func (t *localThrottle) Release(_ context.Context, id string, keys ...string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range keys {
		kept := t.attempts[key][:0:0]
		for _, a := range t.attempts[key] {
			if a.id != id {
				kept = append(kept, a)
			}
		}
		if len(kept) == 0 {
			delete(t.attempts, key)
		} else {
			t.attempts[key] = kept
		}
	}
	return nil
}

// Reset implements throttle.
func (t *localThrottle) Reset(_ context.Context, key string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.attempts, key)
	return nil
}

// recent returns key's attempts still inside the window.
func (t *localThrottle) recent(key string, now time.Time) []attempt {
	times := t.attempts[key]
	for len(times) > 0 && !now.Before(times[0].at.Add(t.window)) {
		times = times[1:]
	}
	if len(times) == 0 {
		delete(t.attempts, key)
		return nil
	}
	return times
}

// sweep drops keys whose attempts have all left the window. If every key is
// still live, it drops arbitrary ones: forgetting some attempts is better than
// unbounded memory, and the per-address limit still slows a spray.
func (t *localThrottle) sweep(now time.Time) {
	for key := range t.attempts {
		if t.recent(key, now) == nil || len(t.attempts) >= maxThrottleKeys {
			delete(t.attempts, key)
		}
	}
}
