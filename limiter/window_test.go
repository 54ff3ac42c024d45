package limiter_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestSlidingWindowNeverExceedsLimit steps an injected clock by random gaps (often 0,
// so requests share a microsecond) and checks both directions: no rolling window ever
// holds more than Limit admissions, and every refusal found its window full.
func TestSlidingWindowNeverExceedsLimit(t *testing.T) {
	t.Parallel()
	const limit, period = 5, time.Second
	clk := newClock()
	l := newRedis(t, redistest.Prefix(t), clk.Now)
	rng := rand.New(rand.NewPCG(7, 11))
	req := limiter.Request{Team: "team", Member: "ada", MemberPolicy: limiter.Policy{Rate: slidingWindow(limit, period)}}

	var admitted []time.Time
	inWindow := func(at time.Time) int { // admissions in (at-period, at]
		n := 0
		for _, a := range admitted {
			if a.After(at.Add(-period)) && !a.After(at) {
				n++
			}
		}
		return n
	}
	for i := range 2000 {
		if rng.IntN(3) > 0 {
			clk.Advance(time.Duration(rng.IntN(250_000)) * time.Microsecond)
		}
		now := clk.Now()
		d := admit(t, l, req)
		if !d.Allowed {
			if n := inWindow(now); n != limit {
				t.Fatalf("attempt %d refused with %d in the window, want %d: %+v", i, n, limit, d)
			}
			continue
		}
		admitted = append(admitted, now)
		if n := inWindow(now); n > limit {
			t.Fatalf("attempt %d: %d admissions in the window ending now, limit %d", i, n, limit)
		}
	}
	if len(admitted) < 100 {
		t.Fatalf("only %d admitted; the schedule did not exercise the window", len(admitted))
	}
}
