package breaker

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock only moves when a test advances it.
type fakeClock struct{ elapsed atomic.Int64 }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time          { return epoch.Add(time.Duration(c.elapsed.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.elapsed.Add(int64(d)) }

func newBreaker(s Settings) (*Breaker, *fakeClock) {
	clk := &fakeClock{}
	s.Now = clk.Now
	return New(s), clk
}

// small keeps the numbers in tests easy to count.
var small = Settings{
	Window:         10 * time.Second,
	Buckets:        10,
	MinRequests:    10,
	FailureRatio:   0.5,
	Cooldown:       5 * time.Second,
	HalfOpenProbes: 3,
	CloseAfter:     3,
}

// send lets n requests through and reports each with the given outcome.
func send(t *testing.T, b *Breaker, n int, success bool) {
	t.Helper()
	for i := range n {
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow #%d: %v", i+1, err)
		}
		b.Done(p, success)
	}
}

// trip opens b with MinRequests failures.
func trip(t *testing.T, b *Breaker) {
	t.Helper()
	send(t, b, b.s.MinRequests, false)
	if got := b.State(); got != Open {
		t.Fatalf("after %d failures: state %v, want open", b.s.MinRequests, got)
	}
}

// halfOpen trips b and waits out the cooldown.
func halfOpen(t *testing.T, b *Breaker, clk *fakeClock) {
	t.Helper()
	trip(t, b)
	clk.Advance(b.s.Cooldown)
	if got := b.State(); got != HalfOpen {
		t.Fatalf("after cooldown: state %v, want half_open", got)
	}
}

func allowN(t *testing.T, b *Breaker, n int) []Permit {
	t.Helper()
	ps := make([]Permit, n)
	for i := range ps {
		p, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow #%d: %v", i+1, err)
		}
		ps[i] = p
	}
	return ps
}

func wantRefused(t *testing.T, b *Breaker) {
	t.Helper()
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow: err %v, want ErrOpen", err)
	}
	if b.Ready() {
		t.Fatal("Ready: true, want false")
	}
}

func TestStateString(t *testing.T) {
	t.Parallel()
	for s, want := range map[State]string{Closed: "closed", Open: "open", HalfOpen: "half_open", 7: "state(7)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	b, clk := newBreaker(Settings{})

	send(t, b, 19, false)
	if got := b.State(); got != Closed {
		t.Fatalf("after 19 failures: state %v, want closed (MinRequests 20)", got)
	}
	send(t, b, 1, false)
	if got := b.State(); got != Open {
		t.Fatalf("after 20 failures: state %v, want open", got)
	}
	if got := b.RetryIn(); got != 5*time.Second {
		t.Fatalf("RetryIn = %v, want 5s", got)
	}
	clk.Advance(5 * time.Second)
	ps := allowN(t, b, 3)
	wantRefused(t, b)
	for _, p := range ps {
		b.Done(p, true)
	}
	if got := b.State(); got != Closed {
		t.Fatalf("after 3 probe successes: state %v, want closed", got)
	}
}

func TestStaysClosedBelowMinRequests(t *testing.T) {
	t.Parallel()
	b, _ := newBreaker(small)
	send(t, b, small.MinRequests-1, false)
	if got := b.State(); got != Closed {
		t.Fatalf("state %v after %d failures, want closed", got, small.MinRequests-1)
	}
	if !b.Ready() {
		t.Fatal("Ready: false, want true")
	}
}

func TestTripsAtRatio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ratio       float64
		minRequests int  // 0 means small's 10
		first       bool // outcome of the first batch
		firstN      int
		secondN     int // then this many of the opposite outcome
		wantState   State
	}{
		{ratio: 0.5, first: true, firstN: 5, secondN: 4, wantState: Closed}, // 4/9: below MinRequests
		{ratio: 0.5, first: true, firstN: 6, secondN: 4, wantState: Closed}, // 4/10
		{ratio: 0.5, first: true, firstN: 5, secondN: 5, wantState: Open},   // 5/10
		{ratio: 0.3, first: true, firstN: 8, secondN: 2, wantState: Closed}, // 2/10
		{ratio: 0.3, first: true, firstN: 7, secondN: 3, wantState: Open},   // 3/10
		// 0.28*25 rounds up to 7.000000000000001 in float64, so comparing
		// failures >= ratio*total would miss 7/25.
		{ratio: 0.28, minRequests: 25, first: true, firstN: 19, secondN: 6, wantState: Closed},
		{ratio: 0.28, minRequests: 25, first: true, firstN: 18, secondN: 7, wantState: Open},
		{ratio: 0.5, first: false, firstN: 5, secondN: 5, wantState: Open}, // the 10th outcome, a success, trips it
		{ratio: 1, first: true, firstN: 1, secondN: 9, wantState: Closed},  // 9/10
		{ratio: 1, first: false, firstN: 10, secondN: 0, wantState: Open},  // 10/10
	}
	for _, tt := range tests {
		outcome := map[bool]string{true: "ok", false: "fail"}
		name := fmt.Sprintf("%v/%d%s_then_%d%s", tt.ratio, tt.firstN, outcome[tt.first], tt.secondN, outcome[!tt.first])
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := small
			s.FailureRatio = tt.ratio
			if tt.minRequests > 0 {
				s.MinRequests = tt.minRequests
			}
			b, _ := newBreaker(s)
			send(t, b, tt.firstN, tt.first)
			send(t, b, tt.secondN, !tt.first)
			if got := b.State(); got != tt.wantState {
				t.Fatalf("state %v, want %v", got, tt.wantState)
			}
		})
	}
}

func TestOldFailuresRollOut(t *testing.T) {
	t.Parallel()
	// Window 10s in 1s buckets: outcomes from t=0 still count at t=9.9s and
	// are gone at t=10s.
	tests := []struct {
		gap       time.Duration
		wantState State
	}{
		{gap: 9*time.Second + 900*time.Millisecond, wantState: Open},
		{gap: 10 * time.Second, wantState: Closed},
		{gap: time.Hour, wantState: Closed},
	}
	for _, tt := range tests {
		t.Run(tt.gap.String(), func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(small)
			send(t, b, 5, false)
			clk.Advance(tt.gap)
			send(t, b, 5, false)
			if got := b.State(); got != tt.wantState {
				t.Fatalf("state %v, want %v", got, tt.wantState)
			}
		})
	}
}

func TestOldFailuresRollOutBucketByBucket(t *testing.T) {
	t.Parallel()
	b, clk := newBreaker(small)
	for range 3 { // 3 failures at t=0s, 1s, 2s
		send(t, b, 1, false)
		clk.Advance(time.Second)
	}
	clk.Advance(7*time.Second + 500*time.Millisecond) // t=10.5s: the t=0 failure is gone
	send(t, b, 7, false)
	if got := b.State(); got != Closed {
		t.Fatalf("state %v with 9 failures in the window, want closed", got)
	}
	send(t, b, 1, false)
	if got := b.State(); got != Open {
		t.Fatalf("state %v with 10 failures in the window, want open", got)
	}
}

func TestOpenRefusesAndRetryInCountsDown(t *testing.T) {
	t.Parallel()
	var changes []transition
	s := small
	s.OnStateChange = func(from, to State) { changes = append(changes, transition{from, to}) }
	b, clk := newBreaker(s)
	trip(t, b)

	steps := []struct{ advance, wantRetryIn time.Duration }{
		{0, 5 * time.Second},
		{2 * time.Second, 3 * time.Second},
		{2*time.Second + 999*time.Millisecond, time.Millisecond},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		wantRefused(t, b)
		if got := b.RetryIn(); got != st.wantRetryIn {
			t.Fatalf("RetryIn = %v, want %v", got, st.wantRetryIn)
		}
		if got := b.State(); got != Open {
			t.Fatalf("state %v with %v left, want open", got, st.wantRetryIn)
		}
	}
	clk.Advance(time.Millisecond)

	if got := b.RetryIn(); got != 0 {
		t.Fatalf("RetryIn after cooldown = %v, want 0", got)
	}
	if !b.Ready() {
		t.Fatal("Ready after cooldown: false, want true")
	}
	if want := []transition{{Closed, Open}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("Ready or RetryIn changed state: changes %v, want %v", changes, want)
	}
	if got := b.State(); got != HalfOpen {
		t.Fatalf("state %v after cooldown, want half_open", got)
	}
	if got := b.RetryIn(); got != 0 {
		t.Fatalf("RetryIn while half-open = %v, want 0", got)
	}
}

func TestHalfOpenAdmitsProbes(t *testing.T) {
	t.Parallel()
	for _, probes := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			t.Parallel()
			s := small
			s.HalfOpenProbes = probes
			s.CloseAfter = probes + 1
			b, clk := newBreaker(s)
			halfOpen(t, b, clk)

			ps := allowN(t, b, probes)
			wantRefused(t, b)
			b.Done(ps[0], true)
			if !b.Ready() {
				t.Fatal("Ready after a probe returned: false, want true")
			}
			allowN(t, b, 1)
			wantRefused(t, b)
			if got := b.State(); got != HalfOpen {
				t.Fatalf("state %v, want half_open", got)
			}
		})
	}
}

func TestProbeFailureReopens(t *testing.T) {
	t.Parallel()
	b, clk := newBreaker(small)
	halfOpen(t, b, clk)
	ps := allowN(t, b, 3)
	clk.Advance(2 * time.Second) // the fresh cooldown starts at the failure, not the first trip

	b.Done(ps[0], true)
	b.Done(ps[1], false)
	if got := b.State(); got != Open {
		t.Fatalf("state %v after a probe failed, want open", got)
	}
	if got := b.RetryIn(); got != small.Cooldown {
		t.Fatalf("RetryIn = %v, want a fresh %v", got, small.Cooldown)
	}
	b.Done(ps[2], true) // issued before the reopen
	if got := b.RetryIn(); got != small.Cooldown {
		t.Fatalf("RetryIn after a stale success = %v, want %v", got, small.Cooldown)
	}
	wantRefused(t, b)
}

func TestCloseAfterSuccesses(t *testing.T) {
	t.Parallel()
	tests := []struct{ probes, closeAfter int }{
		{probes: 3, closeAfter: 3},
		{probes: 1, closeAfter: 3}, // probes go one at a time
		{probes: 3, closeAfter: 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("probes%d_closeAfter%d", tt.probes, tt.closeAfter), func(t *testing.T) {
			t.Parallel()
			s := small
			s.HalfOpenProbes = tt.probes
			s.CloseAfter = tt.closeAfter
			b, clk := newBreaker(s)
			halfOpen(t, b, clk)

			for i := range tt.closeAfter - 1 {
				send(t, b, 1, true)
				if got := b.State(); got != HalfOpen {
					t.Fatalf("state %v after %d successes, want half_open", got, i+1)
				}
			}
			send(t, b, 1, true)
			if got := b.State(); got != Closed {
				t.Fatalf("state %v after %d successes, want closed", got, tt.closeAfter)
			}

			// An empty window: neither the failures that tripped it nor the
			// probe successes count, so it takes exactly MinRequests failures.
			send(t, b, s.MinRequests-1, false)
			if got := b.State(); got != Closed {
				t.Fatalf("state %v after %d new failures, want closed", got, s.MinRequests-1)
			}
			send(t, b, 1, false)
			if got := b.State(); got != Open {
				t.Fatalf("state %v after %d new failures, want open", got, s.MinRequests)
			}
		})
	}
}

func TestStaleDoneIgnored(t *testing.T) {
	t.Parallel()

	t.Run("ClosedPermitWhileOpen", func(t *testing.T) {
		t.Parallel()
		b, clk := newBreaker(small)
		stale := allowN(t, b, 1)[0]
		trip(t, b)
		clk.Advance(time.Second)
		b.Done(stale, true)
		if got := b.State(); got != Open {
			t.Fatalf("state %v, want open", got)
		}
		if got := b.RetryIn(); got != 4*time.Second {
			t.Fatalf("RetryIn = %v, want 4s", got)
		}
	})

	t.Run("ClosedPermitWhileHalfOpen", func(t *testing.T) {
		t.Parallel()
		b, clk := newBreaker(small)
		stale := allowN(t, b, 2)
		halfOpen(t, b, clk)
		allowN(t, b, small.HalfOpenProbes)
		b.Done(stale[0], false) // must not reopen it
		b.Done(stale[1], true)  // must not free a probe slot
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state %v, want half_open", got)
		}
		wantRefused(t, b)
	})

	t.Run("EarlierHalfOpenPermit", func(t *testing.T) {
		t.Parallel()
		b, clk := newBreaker(small)
		halfOpen(t, b, clk)
		ps := allowN(t, b, 2)
		b.Done(ps[0], false) // reopen
		clk.Advance(small.Cooldown)
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state %v, want half_open", got)
		}
		fresh := allowN(t, b, small.HalfOpenProbes)
		b.Done(ps[1], true) // counts neither as a slot nor as a success
		wantRefused(t, b)
		b.Done(fresh[0], true)
		b.Done(fresh[1], true)
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state %v after 2 current successes and 1 stale, want half_open", got)
		}
		b.Done(fresh[2], true)
		if got := b.State(); got != Closed {
			t.Fatalf("state %v after 3 current successes, want closed", got)
		}
	})

	t.Run("EarlierClosedPermitAfterClosing", func(t *testing.T) {
		t.Parallel()
		b, clk := newBreaker(small)
		stale := allowN(t, b, 1)[0]
		halfOpen(t, b, clk)
		send(t, b, small.CloseAfter, true)
		send(t, b, small.MinRequests-1, false)
		b.Done(stale, false) // would be the 10th failure if it counted
		if got := b.State(); got != Closed {
			t.Fatalf("state %v, want closed", got)
		}
	})

	t.Run("ZeroPermit", func(t *testing.T) {
		t.Parallel()
		b, clk := newBreaker(small)
		for range small.MinRequests {
			b.Done(Permit{}, false)
		}
		if got := b.State(); got != Closed {
			t.Fatalf("state %v after zero permits failed, want closed", got)
		}
		halfOpen(t, b, clk)
		allowN(t, b, small.HalfOpenProbes)
		b.Done(Permit{}, false)
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state %v, want half_open", got)
		}
		wantRefused(t, b)
	})
}

func TestOnStateChangeOrder(t *testing.T) {
	t.Parallel()
	var (
		b       *Breaker
		changes []transition
		seen    []State
	)
	s := small
	s.OnStateChange = func(from, to State) {
		changes = append(changes, transition{from, to})
		seen = append(seen, b.State()) // deadlocks if called under the lock
	}
	b, clk := newBreaker(s)

	halfOpen(t, b, clk)
	send(t, b, 1, false)
	clk.Advance(small.Cooldown)
	send(t, b, small.CloseAfter, true)

	want := []transition{
		{Closed, Open}, {Open, HalfOpen}, {HalfOpen, Open}, {Open, HalfOpen}, {HalfOpen, Closed},
	}
	if !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
	if want := []State{Open, HalfOpen, Open, HalfOpen, Closed}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("State() inside OnStateChange = %v, want %v", seen, want)
	}
}

func TestOnStateChangePanicKeepsReporting(t *testing.T) {
	t.Parallel()
	var changes []transition
	s := small
	s.OnStateChange = func(from, to State) {
		changes = append(changes, transition{from, to})
		if to == Open {
			panic("callback bug")
		}
	}
	b, clk := newBreaker(s)

	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in OnStateChange did not reach the caller")
			}
		}()
		send(t, b, small.MinRequests, false)
	}()
	clk.Advance(small.Cooldown)
	if got := b.State(); got != HalfOpen {
		t.Fatalf("state %v, want half_open", got)
	}
	if want := []transition{{Closed, Open}, {Open, HalfOpen}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
}

func TestOnStateChangeInOrderAcrossGoroutines(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		changes []transition
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	s := small
	s.OnStateChange = func(from, to State) {
		if to == Open {
			close(entered)
			<-release
		}
		mu.Lock()
		changes = append(changes, transition{from, to})
		mu.Unlock()
	}
	b, clk := newBreaker(s)

	tripped := make(chan struct{})
	go func() {
		defer close(tripped)
		for range small.MinRequests {
			p, _ := b.Allow()
			b.Done(p, false) // the last one blocks in OnStateChange
		}
	}()
	<-entered
	clk.Advance(small.Cooldown)
	if got := b.State(); got != HalfOpen { // must not wait for, nor overtake, the closed->open report
		t.Errorf("state %v, want half_open", got)
	}
	close(release)
	<-tripped

	mu.Lock()
	defer mu.Unlock()
	if want := []transition{{Closed, Open}, {Open, HalfOpen}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
}

// TestConcurrent hammers one Breaker from many goroutines through alternating
// healthy and failing phases, checking its invariants under the lock after
// every call and the order of reported transitions.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const (
		workers = 16
		rounds  = 2000
		step    = 10 * time.Millisecond
		phase   = 20 * time.Second // failing, then healthy, then failing...
	)

	var (
		b      *Breaker
		mu     sync.Mutex
		last   = Closed
		counts = map[transition]int{}
	)
	s := small
	s.OnStateChange = func(from, to State) {
		mu.Lock()
		defer mu.Unlock()
		if from != last || from == to {
			t.Errorf("transition %v->%v after reaching %v", from, to, last)
		}
		last = to
		counts[transition{from, to}]++
	}
	b, clk := newBreaker(s)

	check := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.probes < 0 || b.probes > s.HalfOpenProbes {
			t.Errorf("%d probes outstanding, limit %d", b.probes, s.HalfOpenProbes)
		}
		if b.state != HalfOpen && b.probes != 0 {
			t.Errorf("%d probes outstanding while %v", b.probes, b.state)
		}
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				clk.Advance(step)
				p, err := b.Allow()
				check()
				if err != nil {
					continue
				}
				b.Ready()
				b.RetryIn()
				healthy := time.Duration(clk.elapsed.Load())/phase%2 == 1
				b.Done(p, healthy)
				check()
			}
		})
	}
	wg.Wait()

	got := b.State() // may half-open, reported before it returns
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range []transition{{Closed, Open}, {Open, HalfOpen}, {HalfOpen, Open}, {HalfOpen, Closed}} {
		if counts[tr] == 0 {
			t.Errorf("never saw %v->%v; counts %v", tr.from, tr.to, counts)
		}
	}
	if got != last {
		t.Errorf("state %v, last reported %v", got, last)
	}
	check()
}

// Not parallel: AllocsPerRun counts allocations by every goroutine.
func TestAllowDoneDoNotAllocate(t *testing.T) {
	s := small
	s.OnStateChange = func(from, to State) {}
	b, clk := newBreaker(s)
	if n := testing.AllocsPerRun(100, func() { send(t, b, 1, true) }); n != 0 {
		t.Errorf("closed: %v allocs per Allow+Done, want 0", n)
	}
	clk.Advance(s.Window) // drop those successes so MinRequests failures trip it

	// A full cycle also covers refusals, probes and queued state changes.
	cycle := func() {
		trip(t, b)
		wantRefused(t, b)
		clk.Advance(s.Cooldown)
		send(t, b, s.CloseAfter, true)
	}
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("closed->open->half_open->closed: %v allocs per cycle, want 0", n)
	}
}

func BenchmarkAllowDone(b *testing.B) {
	b.Run("Serial", func(b *testing.B) {
		br := New(Settings{})
		b.ReportAllocs()
		for b.Loop() {
			p, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			br.Done(p, true)
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		br := New(Settings{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := br.Allow()
				if err != nil {
					b.Fatal(err)
				}
				br.Done(p, true)
			}
		})
	})
}

// TestReleaseFreesAProbeSlotAndCountsNothing: a probe whose caller went away
// gives its slot back without closing or reopening the breaker.
func TestReleaseFreesAProbeSlotAndCountsNothing(t *testing.T) {
	t.Parallel()
	clock := time.Unix(1_000_000, 0)
	b := New(Settings{MinRequests: 1, FailureRatio: 0.5, Cooldown: time.Second, HalfOpenProbes: 1, CloseAfter: 1,
		Now: func() time.Time { return clock }})
	p, _ := b.Allow()
	b.Done(p, false)
	clock = clock.Add(time.Second)
	probe, err := b.Allow()
	if err != nil || b.State() != HalfOpen {
		t.Fatalf("after the cooldown: %v in %s", err, b.State())
	}
	if _, err := b.Allow(); err != ErrOpen {
		t.Fatalf("second probe while the only slot is taken: %v", err)
	}
	b.Release(probe)
	if b.State() != HalfOpen {
		t.Fatalf("Release moved the breaker to %s", b.State())
	}
	next, err := b.Allow()
	if err != nil {
		t.Fatalf("the released slot was not freed: %v", err)
	}
	b.Done(next, true)
	if b.State() != Closed {
		t.Fatalf("a successful probe after a release left it %s", b.State())
	}
	closedPermit, _ := b.Allow()
	b.Release(closedPermit) // counts nothing while closed
	if b.State() != Closed {
		t.Fatalf("Release while closed moved it to %s", b.State())
	}
}
