package providerlimits

import (
	"cmp"
	"net/http"
	"sync"
	"time"
)

// Options tune a Tracker. Zero values take the defaults noted.
type Options struct {
	// MaxWait bounds how long a request may wait for the account's capacity
	// before the gateway answers 429 itself (default 2s; negative: never waits).
	MaxWait time.Duration
	// MaxHold bounds how long anything learned holds traffic (default 1m): a
	// block ends by then, and a pace learned longer ago is forgotten, so the
	// next request goes and learns again. A hostile upstream cannot stop a
	// route for longer.
	MaxHold time.Duration
	// Share is how many replicas send to the accounts: each paces itself to
	// its share of an account's rate (default 1).
	Share int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Key names one provider target: its id, and the upstream host and credential
// variable it is labelled with in metrics.
type Key struct{ ID, Upstream, Credential string }

// Tracker knows, per target, the account's remaining capacity and when it
// comes back. Reserve and Observe are the request path's: in memory, no I/O.
// Safe for concurrent use.
type Tracker struct {
	opts    Options
	targets sync.Map // Key.ID -> *state
	share   *share   // nil without Redis
}

// New returns a Tracker; Share (share.go) adds Redis.
func New(o Options) *Tracker {
	o.MaxWait = cmp.Or(o.MaxWait, 2*time.Second)
	o.MaxHold = cmp.Or(o.MaxHold, time.Minute)
	o.Share = max(o.Share, 1)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Tracker{opts: o}
}

// state is one target's account as this replica sees it. Requests are paced
// by a token bucket holding this replica's share of the account's requests,
// refilled at its share of the rate the headers imply; tokens (and any 429)
// only block until their reset.
type state struct {
	key Key
	mu  sync.Mutex
	// rate is this replica's share of requests per second; 0 when not known,
	// and then nothing is paced.
	rate, burst, tokens float64
	at                  time.Time // tokens are as of at
	// sentAt is when the request whose answer was learned last was sent: an
	// older answer, arriving late, says less than what is known.
	sentAt       time.Time
	reserved     uint64 // reservations made, ever
	blockedUntil time.Time
	// What the provider last reported, for metrics; -1 unknown.
	limit, remaining, tokensRemaining int64
	held, refused                     uint64
	dirty                             bool // learned something Redis has not heard
}

// Now reads the tracker's clock, which Observe's sentAt is on.
func (t *Tracker) Now() time.Time { return t.opts.Now() }

func (t *Tracker) state(k Key) *state {
	if s, ok := t.targets.Load(k.ID); ok {
		return s.(*state)
	}
	s, _ := t.targets.LoadOrStore(k.ID, &state{key: k, limit: -1, remaining: -1, tokensRemaining: -1})
	return s.(*state)
}

// forgetStale drops a pace learned more than MaxHold ago.
func (s *state) forgetStale(now time.Time, maxHold time.Duration) {
	if s.rate > 0 && now.Sub(s.sentAt) > maxHold {
		s.rate, s.tokens = 0, 0
	}
}

func (s *state) refill(now time.Time) {
	if s.rate > 0 && now.After(s.at) {
		s.tokens = min(s.burst, s.tokens+s.rate*now.Sub(s.at).Seconds())
	}
	s.at = now
}

// wait is how long a request must wait for the target's capacity.
func (s *state) wait(now time.Time) time.Duration {
	var wait time.Duration
	if s.blockedUntil.After(now) {
		wait = s.blockedUntil.Sub(now)
	}
	if s.rate > 0 {
		s.refill(now)
		if s.tokens < 1 {
			// Bounded before the conversion: a tiny rate must not overflow it.
			secs := min((1-s.tokens)/s.rate, 1e6)
			wait = max(wait, time.Duration(secs*float64(time.Second)))
		}
	}
	return wait
}

// Room says a request to k would go at once.
func (t *Tracker) Room(k Key) bool {
	t.touch()
	s := t.state(k)
	now := t.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetStale(now, t.opts.MaxHold)
	return s.wait(now) == 0
}

// Reservation is one request's claim on a target's capacity.
type Reservation struct {
	// OK says the request may go after Wait; otherwise the account has no
	// room within MaxWait and the caller should retry after RetryAfter.
	OK         bool
	Wait       time.Duration
	RetryAfter time.Duration
	s          *state
	seq        uint64
	paced      bool
}

// Reserve claims the next request's place at k.
func (t *Tracker) Reserve(k Key) Reservation {
	t.touch()
	s := t.state(k)
	now := t.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetStale(now, t.opts.MaxHold)
	wait := s.wait(now)
	if wait > 0 && (t.opts.MaxWait < 0 || wait > t.opts.MaxWait) {
		s.refused++
		return Reservation{RetryAfter: min(wait, t.opts.MaxHold), s: s}
	}
	r := Reservation{OK: true, Wait: wait, s: s, paced: s.rate > 0}
	if r.paced {
		s.tokens--
	}
	s.reserved++
	r.seq = s.reserved
	if wait > 0 {
		s.held++
	}
	return r
}

// Cancel gives back a reservation whose request was never sent.
func (r Reservation) Cancel() {
	if !r.OK || !r.paced {
		return
	}
	r.s.mu.Lock()
	r.s.tokens = min(r.s.burst, r.s.tokens+1)
	r.s.mu.Unlock()
}

// Observe learns from the answer to a request sent at sentAt under r (the
// zero Reservation for a request sent without one).
func (t *Tracker) Observe(k Key, r Reservation, sentAt time.Time, status int, h http.Header) {
	now := t.opts.Now()
	o := Parse(h, now)
	if !o.Requests.Known() && !o.Tokens.Known() && !o.InputTokens.Known() && !o.OutputTokens.Known() && status != http.StatusTooManyRequests {
		return
	}
	s := t.state(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := r.seq
	if r.s == nil {
		seq = s.reserved
	}
	n := float64(t.opts.Share)
	if w := o.Requests; w.Known() && !sentAt.Before(s.sentAt) {
		l, rem := float64(w.Limit), float64(w.Remaining)
		// The rate the headers imply: what is missing comes back by the reset.
		// Too little missing says too little (resets are rounded to seconds).
		if d := w.Reset.Sub(now); !w.Reset.IsZero() && d > 0 && l-rem >= l/10 {
			s.rate = (l - rem) / d.Seconds() / n
		} else if s.rate == 0 {
			s.rate = l / 60 / n // both providers' limits are per minute
		}
		s.burst = l / n
		// What the answer says, refilled since, less what was sent after it.
		s.tokens = min(s.burst, rem/n+s.rate*now.Sub(sentAt).Seconds()) - float64(s.reserved-seq)
		s.at, s.sentAt = now, sentAt
		s.limit, s.remaining = w.Limit, w.Remaining
		s.dirty = true
	}
	for _, w := range []Window{o.Tokens, o.InputTokens, o.OutputTokens} {
		if w.Known() && w.Remaining == 0 && w.Reset.After(now) {
			s.block(now, w.Reset.Sub(now), t.opts.MaxHold)
		}
	}
	if w := cmp.Or(o.Tokens, o.InputTokens); w.Known() {
		s.tokensRemaining = w.Remaining
	}
	if status == http.StatusTooManyRequests {
		s.block(now, cmp.Or(o.RetryAfter, time.Second), t.opts.MaxHold)
		if s.rate > 0 {
			s.refill(now)
			s.tokens = min(s.tokens, 0)
		}
	}
}

func (s *state) block(now time.Time, d, maxHold time.Duration) {
	if until := now.Add(min(d, maxHold)); until.After(s.blockedUntil) {
		s.blockedUntil = until
		s.dirty = true
	}
}

// Stat is one target's figures for metrics.
type Stat struct {
	Key
	// RequestsRemaining and TokensRemaining are what the provider last
	// reported; -1 when it has not.
	RequestsRemaining, TokensRemaining int64
	// Held counts requests that waited for the account's capacity, Refused
	// those answered 429 by the gateway instead of sent.
	Held, Refused uint64
}

// Stats reads every target's figures.
func (t *Tracker) Stats() []Stat {
	var out []Stat
	t.targets.Range(func(_, v any) bool {
		s := v.(*state)
		s.mu.Lock()
		out = append(out, Stat{Key: s.key, RequestsRemaining: s.remaining, TokensRemaining: s.tokensRemaining, Held: s.held, Refused: s.refused})
		s.mu.Unlock()
		return true
	})
	return out
}
