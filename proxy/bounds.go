package proxy

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// inFlightCap is the gateway-wide bound on requests being served. Past it the
// gateway sheds at once with 503 + Retry-After: queueing would only grow memory
// until the machine swaps, while a shed caller's SDK retries elsewhere or later.
type inFlightCap struct {
	limit int64
	n     atomic.Int64
}

func (c *inFlightCap) enter() bool {
	if c.limit <= 0 {
		return true
	}
	if c.n.Add(1) > c.limit {
		c.n.Add(-1)
		return false
	}
	return true
}

func (c *inFlightCap) leave() {
	if c.limit > 0 {
		c.n.Add(-1)
	}
}

// memberGates bound the requests one member has in flight on this replica, with
// a short queue so a burst is smoothed rather than refused. This protects the
// replica from one caller's thousands of open requests; the member's policy
// concurrency limit (exact across replicas, in Redis) is a separate control.
type memberGates struct {
	limit, queue int
	wait         time.Duration
	mu           sync.Mutex
	gates        map[int64]*memberGate
}

type memberGate struct {
	slots   chan struct{}
	waiting atomic.Int32
}

func newMemberGates(limit, queue int, wait time.Duration) *memberGates {
	return &memberGates{limit: limit, queue: queue, wait: wait, gates: make(map[int64]*memberGate)}
}

// enter takes one of the member's slots, waiting in the queue up to the queue
// wait. It returns a release func, or the refusal to send.
func (m *memberGates) enter(ctx context.Context, memberID int64) (func(), *Error) {
	if m.limit <= 0 {
		return func() {}, nil
	}
	m.mu.Lock()
	g, ok := m.gates[memberID]
	if !ok {
		g = &memberGate{slots: make(chan struct{}, m.limit)}
		m.gates[memberID] = g
	}
	m.mu.Unlock()
	release := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return release, nil
	default:
	}
	full := &Error{Kind: KindRateLimit, code: "member_in_flight", Message: "you have " + strconv.Itoa(m.limit) +
		" requests in flight on this gateway and " + strconv.Itoa(m.queue) + " waiting (MEMBER_MAX_IN_FLIGHT, MEMBER_QUEUE_DEPTH); retry when some finish"}
	if int(g.waiting.Add(1)) > m.queue {
		g.waiting.Add(-1)
		return nil, full
	}
	defer g.waiting.Add(-1)
	timer := time.NewTimer(m.wait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return release, nil
	case <-timer.C:
		full.Message = "you have " + strconv.Itoa(m.limit) + " requests in flight on this gateway and none finished within " +
			m.wait.String() + " (MEMBER_QUEUE_WAIT); retry when some finish"
		return nil, full
	case <-ctx.Done():
		return nil, &Error{Kind: KindInvalidRequest, code: "client_gone", Message: "the caller went away while queued"}
	}
}
