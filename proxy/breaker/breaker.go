// Package breaker is a circuit breaker for one upstream target: it stops
// sending requests to a target whose recent failure ratio is too high, then
// lets a few probes through after a cooldown to see whether it recovered.
//
// Why not gobreaker: sony/gobreaker/v2 (v2.4.0) has a rolling window
// (BucketPeriod) but reads time.Now directly in its request path, so tests
// cannot drive its state machine on a fake clock. Its two-step Allow also
// allocates a closure per request, it calls OnStateChange while holding its
// mutex, and one MaxRequests knob both caps half-open requests (in total, not
// outstanding) and sets how many successes close the breaker.
package breaker

import (
	"errors"
	"strconv"
	"sync"
	"time"
)

// State is where a Breaker is in its closed -> open -> half-open cycle.
type State int32

const (
	Closed   State = iota // requests flow; outcomes are counted
	Open                  // requests are refused until the cooldown passes
	HalfOpen              // a few probes decide between Closed and Open
)

// String returns the state's name as used in logs and metric labels.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Settings configures a Breaker. Zero or negative numbers take their defaults.
type Settings struct {
	Window         time.Duration        // rolling window for the failure ratio (default 10s)
	Buckets        int                  // window granularity (default 10)
	MinRequests    int                  // outcomes needed in the window before it can trip (default 20)
	FailureRatio   float64              // trips when failures/total >= this (default 0.5)
	Cooldown       time.Duration        // how long it stays open before half-opening (default 5s)
	HalfOpenProbes int                  // requests let through at once while half-open (default 3)
	CloseAfter     int                  // consecutive probe successes that close it (default 3)
	Now            func() time.Time     // default time.Now
	OnStateChange  func(from, to State) // called in order, never while the breaker is locked
}

// ErrOpen is returned by Allow when the breaker refuses a request.
var ErrOpen = errors.New("circuit breaker is open")

// Permit is handed out by Allow and returned to Done; it remembers which
// generation (state epoch) the request started in, so an outcome from before a
// transition does not count in the new state.
type Permit struct {
	generation uint64
}

// Breaker tracks the health of one upstream target. It is safe for
// concurrent use.
type Breaker struct {
	s Settings

	mu             sync.Mutex
	state          State
	generation     uint64 // bumped on every transition; starts at 1 so a zero Permit is stale
	openUntil      time.Time
	window         window
	probes         int // permits outstanding from the current half-open generation
	probeSuccesses int
	pending        []transition // state changes not yet reported to OnStateChange
	notifying      bool         // a goroutine is draining pending
}

type transition struct{ from, to State }

// New returns a closed Breaker.
func New(s Settings) *Breaker {
	if s.Window <= 0 {
		s.Window = 10 * time.Second
	}
	if s.Buckets <= 0 {
		s.Buckets = 10
	}
	if s.MinRequests <= 0 {
		s.MinRequests = 20
	}
	if s.FailureRatio <= 0 {
		s.FailureRatio = 0.5
	}
	if s.Cooldown <= 0 {
		s.Cooldown = 5 * time.Second
	}
	if s.HalfOpenProbes <= 0 {
		s.HalfOpenProbes = 3
	}
	if s.CloseAfter <= 0 {
		s.CloseAfter = 3
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return &Breaker{
		s:          s,
		generation: 1,
		window:     newWindow(s.Window, s.Buckets, s.Now()),
	}
}

// Allow asks to send one request. It returns ErrOpen while the breaker is
// open, or half-open with every probe slot taken; otherwise the caller must
// pass the Permit to Done exactly once.
func (b *Breaker) Allow() (Permit, error) {
	b.mu.Lock()
	if b.state == Open {
		b.halfOpenIfCooled(b.s.Now())
	}
	switch b.state {
	case Open:
		b.unlock()
		return Permit{}, ErrOpen
	case HalfOpen:
		if b.probes >= b.s.HalfOpenProbes {
			b.unlock()
			return Permit{}, ErrOpen
		}
		b.probes++
	}
	p := Permit{generation: b.generation}
	b.unlock()
	return p, nil
}

// Done reports the outcome of a request let through by Allow. An outcome from
// an earlier generation is ignored: it says nothing about the target as the
// breaker now sees it, and it never held a slot in the current half-open round.
func (b *Breaker) Done(p Permit, success bool) {
	b.mu.Lock()
	if p.generation != b.generation {
		b.unlock()
		return
	}
	now := b.s.Now()
	switch b.state {
	case Closed:
		b.window.record(now, success)
		w := &b.window
		if w.total >= b.s.MinRequests && float64(w.failures)/float64(w.total) >= b.s.FailureRatio {
			b.setState(Open, now)
		}
	case HalfOpen:
		b.probes--
		switch {
		case !success:
			b.setState(Open, now)
		case b.probeSuccesses+1 >= b.s.CloseAfter:
			b.setState(Closed, now)
		default:
			b.probeSuccesses++
		}
	}
	b.unlock()
}

// Release returns a permit whose outcome says nothing about the upstream (the
// caller went away first): it frees a half-open probe slot and counts nothing.
func (b *Breaker) Release(p Permit) {
	b.mu.Lock()
	if p.generation == b.generation && b.state == HalfOpen {
		b.probes--
	}
	b.unlock()
}

// Ready reports whether Allow would succeed now, without taking a slot or
// changing state, so a load balancer can skip this target.
func (b *Breaker) Ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		return !b.s.Now().Before(b.openUntil)
	case HalfOpen:
		return b.probes < b.s.HalfOpenProbes
	}
	return true
}

// State returns the current state, moving open to half-open if the cooldown
// has passed.
func (b *Breaker) State() State {
	b.mu.Lock()
	if b.state == Open {
		b.halfOpenIfCooled(b.s.Now())
	}
	s := b.state
	b.unlock()
	return s
}

// RetryIn returns, while open, the time left until the breaker half-opens; 0
// otherwise. It suits a Retry-After header.
func (b *Breaker) RetryIn() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Open {
		return 0
	}
	return max(b.openUntil.Sub(b.s.Now()), 0)
}

func (b *Breaker) halfOpenIfCooled(now time.Time) {
	if !now.Before(b.openUntil) {
		b.setState(HalfOpen, now)
	}
}

// setState moves to a new generation; the caller holds mu.
func (b *Breaker) setState(to State, now time.Time) {
	from := b.state
	b.state = to
	b.generation++
	b.probes, b.probeSuccesses = 0, 0
	b.window.reset()
	if to == Open {
		b.openUntil = now.Add(b.s.Cooldown)
	}
	if b.s.OnStateChange != nil {
		b.pending = append(b.pending, transition{from, to})
	}
}

// unlock releases mu, then reports queued state changes unless another
// goroutine is already doing so. One reporter at a time, taking changes in the
// order they were queued, keeps OnStateChange in order without holding mu
// while it runs, so it may call back into the Breaker.
func (b *Breaker) unlock() {
	if b.notifying || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	b.notifying = true
	b.mu.Unlock()
	b.report()
}

func (b *Breaker) report() {
	finished := false
	defer func() {
		// OnStateChange panicked: hand reporting to the next transition
		// instead of leaving notifying stuck.
		if !finished {
			b.mu.Lock()
			b.notifying = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.notifying = false
			b.mu.Unlock()
			finished = true
			return
		}
		t := b.pending[0]
		b.pending = append(b.pending[:0], b.pending[1:]...)
		b.mu.Unlock()
		b.s.OnStateChange(t.from, t.to)
	}
}
