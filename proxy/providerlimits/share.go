package providerlimits

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// share carries what each replica learned to the others through Redis, one
// hash per target:
//
//	<prefix>provider:<sha256(target id)[:16]>  sent, limit, remaining, rate, blocked
//
// The request path never waits for it: Run writes what changed and reads what
// the others wrote every interval, so a replica that has not yet sent to an
// exhausted target still holds its requests.
type share struct {
	rdb       redis.UniversalClient
	prefix    string
	interval  time.Duration
	idleAfter time.Duration
	log       *slog.Logger
	// used is when a request last asked for a target (unix ns); wake tells Run
	// that one asked after the replica was idle.
	used atomic.Int64
	wake chan struct{}
}

// ShareOptions configure the Redis sharing.
type ShareOptions struct {
	Prefix string // REDIS_KEY_PREFIX
	// Interval is how often Run writes and reads (default 100ms): the most a
	// replica lags behind another's 429.
	Interval time.Duration
	// IdleAfter is how long after this replica's last request Run stops
	// reading (default 10s); the next request wakes it for a read at once.
	IdleAfter time.Duration
	Logger    *slog.Logger
}

// Share makes t share its targets' state through rdb once Run runs.
func (t *Tracker) Share(rdb redis.UniversalClient, o ShareOptions) *Tracker {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	t.share = &share{rdb: rdb, prefix: o.Prefix, interval: cmp.Or(o.Interval, 100*time.Millisecond),
		idleAfter: cmp.Or(o.IdleAfter, 10*time.Second), log: o.Logger, wake: make(chan struct{}, 1)}
	return t
}

// touch notes a request on the request path (one atomic swap), waking Run
// when it is the first after the replica went idle.
func (t *Tracker) touch() {
	if t.share == nil {
		return
	}
	now := time.Now().UnixNano()
	if prev := t.share.used.Swap(now); now-prev >= int64(t.share.idleAfter) {
		select {
		case t.share.wake <- struct{}{}:
		default:
		}
	}
}

// quiet says nobody sent a request for IdleAfter and this replica learned
// nothing Redis has not heard: then there is nothing to write, and nothing
// read would be used before the next request, which wakes Run.
func (t *Tracker) quiet() bool {
	if time.Now().UnixNano()-t.share.used.Load() < int64(t.share.idleAfter) {
		return false
	}
	quiet := true
	t.targets.Range(func(_, v any) bool {
		s := v.(*state)
		s.mu.Lock()
		quiet = !s.dirty
		s.mu.Unlock()
		return quiet
	})
	return quiet
}

//go:embed share.lua
var shareSource string
var shareScript = redis.NewScript(shareSource)

func (s *share) key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "provider:" + hex.EncodeToString(sum[:8])
}

// Run keeps the targets that targets lists in step with the other replicas
// every interval until ctx ends. Without Redis it returns at once. While the
// replica is idle it sends nothing; the first request after that wakes it, so
// what the others learned meanwhile binds from the requests that follow it,
// as it binds within one interval while busy.
func (t *Tracker) Run(ctx context.Context, targets func() []Key) {
	if t.share == nil {
		return
	}
	ticker := time.NewTicker(t.share.interval)
	defer ticker.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if t.quiet() {
				continue
			}
		case <-t.share.wake:
		}
		for _, k := range targets() {
			t.state(k)
		}
		err := t.sync(ctx)
		if err != nil && !failing && ctx.Err() == nil {
			t.share.log.Warn("provider rate limits: Redis sync failed; each replica keeps what it learned itself", "err", err)
		}
		failing = err != nil
	}
}

// sync writes each target this replica learned something about, then reads
// every target in one pipeline and takes what is newer.
func (t *Tracker) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(t.share.interval, time.Second))
	defer cancel()
	ttl := strconv.FormatInt((2 * t.opts.MaxHold).Milliseconds(), 10)
	var states []*state
	var errs []error
	t.targets.Range(func(_, v any) bool {
		s := v.(*state)
		states = append(states, s)
		s.mu.Lock()
		dirty := s.dirty
		s.dirty = false
		args := []any{ms(s.sentAt), s.limit, s.remaining, strconv.FormatFloat(s.rate*float64(t.opts.Share), 'g', -1, 64), ms(s.blockedUntil), ttl}
		s.mu.Unlock()
		if dirty {
			if err := shareScript.Run(ctx, t.share.rdb, []string{t.share.key(s.key.ID)}, args...).Err(); err != nil {
				errs = append(errs, err)
				s.mu.Lock()
				s.dirty = true // try again next time
				s.mu.Unlock()
			}
		}
		return true
	})
	pipe := t.share.rdb.Pipeline()
	reads := make([]*redis.SliceCmd, len(states))
	for i, s := range states {
		reads[i] = pipe.HMGet(ctx, t.share.key(s.key.ID), "sent", "limit", "remaining", "rate", "blocked")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return errors.Join(append(errs, err)...)
	}
	now := t.opts.Now()
	for i, s := range states {
		v, err := reads[i].Result()
		if err != nil || len(v) != 5 {
			continue
		}
		s.mu.Lock()
		s.merge(now, num(v[0]), num(v[1]), num(v[2]), num(v[3]), num(v[4]), t.opts)
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// merge takes what another replica learned when it is newer than what this
// one knows: its block, and its observation of the account's requests.
func (s *state) merge(now time.Time, sentMS, limit, remaining, rate, blockedMS float64, o Options) {
	if blocked := time.UnixMilli(int64(blockedMS)); blockedMS > 0 && blocked.After(s.blockedUntil) && blocked.After(now) {
		s.blockedUntil = minTime(blocked, now.Add(o.MaxHold))
	}
	sent := time.UnixMilli(int64(sentMS))
	if sentMS <= 0 || !sent.After(s.sentAt) || now.Sub(sent) > o.MaxHold || limit <= 0 || remaining < 0 || remaining > limit || !(rate > 0) {
		return
	}
	n := float64(o.Share)
	fresh := s.rate == 0
	s.refill(now)
	s.rate, s.burst = rate/n, limit/n
	est := min(s.burst, remaining/n+s.rate*max(now.Sub(sent).Seconds(), 0))
	if fresh {
		s.tokens = est
	} else {
		s.tokens = min(s.tokens, est)
	}
	s.at, s.sentAt = now, sent
	s.limit, s.remaining = int64(limit), int64(remaining)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// num reads a hash field written by share.lua; a missing or foreign value is 0.
func num(v any) float64 {
	s, _ := v.(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}
