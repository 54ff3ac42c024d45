package proxy

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

// settles runs each request's SETTLE after its response, off the request's
// path: the caller has its whole answer before the limiter is called. A
// settle that fails or times out is sent again later (SETTLE is idempotent
// per request id), so a member is charged what the provider reported whenever
// the gateway saw it; only a replica that dies with settles still queued
// leaves holds to be charged in full when their leases end.
//
// Jobs wait in a bounded queue for a few workers, each of which takes what has
// queued up (up to settleBatch) and settles it in one round trip. When the
// queue is full the request settles inline, which slows that request rather
// than forgetting its settle.
type settles struct {
	lim   limiter.Limiter
	log   *slog.Logger
	queue chan settleJob
	// backoff is the wait before each retry; a settle still failing after the
	// last is abandoned (its hold is charged in full when its lease ends).
	backoff []time.Duration

	workers atomic.Int32
	pending sync.WaitGroup // jobs queued, being settled or waiting to retry

	// byMember counts the settles of each member with some not yet done, so
	// that the member's next paid admission on this replica can wait for them
	// (waitMember).
	mu       sync.Mutex
	byMember map[memberRef]*memberSettles

	retried, abandoned, inline atomic.Uint64
}

type memberRef struct{ team, member string }

// memberSettles counts one member's settles: added and done so far, and a
// channel closed (and replaced) each time one is done.
type memberSettles struct {
	added, done int
	progress    chan struct{}
}

type settleJob struct {
	// ctx is the request's, without its cancellation: it carries the request's
	// trace to the settle's span.
	ctx     context.Context
	s       limiter.Settlement
	attempt int // retries so far
}

const (
	settleQueueDepth = 8192
	settleWorkers    = 4
	settleBatch      = 64
	// settleWorkerIdle is how long a worker waits for work before it exits.
	settleWorkerIdle = time.Second
)

// settleBackoff reaches about a minute in all: enough for a Redis restart or
// failover, and far inside the hold's lease, after which retrying is useless.
var settleBackoff = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second,
	10 * time.Second, 15 * time.Second, 30 * time.Second}

func newSettles(lim limiter.Limiter, log *slog.Logger) *settles {
	return &settles{lim: lim, log: log, queue: make(chan settleJob, settleQueueDepth), backoff: settleBackoff,
		byMember: map[memberRef]*memberSettles{}}
}

// add settles s after the caller returns, or now if the queue is full.
func (q *settles) add(ctx context.Context, s limiter.Settlement) {
	q.pending.Add(1)
	ref := memberRef{s.Team, s.Member}
	q.mu.Lock()
	m := q.byMember[ref]
	if m == nil {
		m = &memberSettles{progress: make(chan struct{})}
		q.byMember[ref] = m
	}
	m.added++
	q.mu.Unlock()
	select {
	case q.queue <- settleJob{ctx: ctx, s: s}:
		q.spawn()
	default:
		q.inline.Add(1)
		q.settle([]settleJob{{ctx: ctx, s: s}})
	}
}

// spawn starts a worker unless enough run.
func (q *settles) spawn() {
	if q.workers.Add(1) > settleWorkers {
		q.workers.Add(-1)
		return
	}
	go q.work()
}

func (q *settles) work() {
	idle := time.NewTimer(settleWorkerIdle)
	defer idle.Stop()
	batch := make([]settleJob, 0, settleBatch)
	for {
		select {
		case j := <-q.queue:
			batch = append(batch[:0], j)
		drain:
			for len(batch) < settleBatch {
				select {
				case j := <-q.queue:
					batch = append(batch, j)
				default:
					break drain
				}
			}
			q.settle(batch)
			idle.Reset(settleWorkerIdle)
		case <-idle.C:
			q.workers.Add(-1)
			// A job queued while this worker was deciding to leave finds no one.
			if len(q.queue) > 0 {
				q.spawn()
			}
			return
		}
	}
}

// settle runs one batch and schedules a retry for each settle that failed.
func (q *settles) settle(batch []settleJob) {
	var errs []error
	if len(batch) == 1 {
		// One call keeps the settle's span a child of its request's trace.
		_, err := q.lim.Settle(batch[0].ctx, batch[0].s)
		errs = []error{err}
	} else {
		ss := make([]limiter.Settlement, len(batch))
		for i, j := range batch {
			ss[i] = j.s
		}
		errs = q.lim.SettleAll(context.Background(), ss)
	}
	for i, err := range errs {
		j := batch[i]
		if err == nil {
			q.done(j)
			continue
		}
		if j.attempt == len(q.backoff) {
			q.abandoned.Add(1)
			q.log.LogAttrs(j.ctx, slog.LevelError, SettleFailedMsg, slog.String("request_id", j.s.RequestID),
				slog.Int("attempts", j.attempt+1), slog.Any("err", err))
			q.done(j)
			continue
		}
		q.retried.Add(1)
		wait := q.backoff[j.attempt]
		j.attempt++
		time.AfterFunc(wait, func() { q.requeue(j) })
	}
}

func (q *settles) done(j settleJob) {
	ref := memberRef{j.s.Team, j.s.Member}
	q.mu.Lock()
	if m := q.byMember[ref]; m != nil {
		m.done++
		close(m.progress)
		m.progress = make(chan struct{})
		if m.done == m.added {
			delete(q.byMember, ref)
		}
	}
	q.mu.Unlock()
	q.pending.Done()
}

// waitMember waits, at most max, until as many of the member's settles are
// done on this replica as had been queued when it was called. A paid
// admission calls it first, so that a member sending one request after another
// is admitted against what the last one really cost, not its hold: that keeps
// the overspend bound at one request's under-estimate for a member calling one
// at a time. It never waits for settles queued after it (a member with many
// requests in flight would wait for ever), and settles still failing past max
// keep their holds, which the admission counts.
func (q *settles) waitMember(ctx context.Context, team, member string, max time.Duration) {
	ref := memberRef{team, member}
	q.mu.Lock()
	m := q.byMember[ref]
	if m == nil {
		q.mu.Unlock()
		return
	}
	target := m.added
	q.mu.Unlock()
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		q.mu.Lock()
		if q.byMember[ref] != m || m.done >= target {
			q.mu.Unlock()
			return
		}
		progress := m.progress
		q.mu.Unlock()
		select {
		case <-progress:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// requeue puts a job to retry back in the queue, or settles it on the timer's
// goroutine when the queue is full.
func (q *settles) requeue(j settleJob) {
	select {
	case q.queue <- j:
		q.spawn()
	default:
		q.settle([]settleJob{j})
	}
}

// drain waits until every settle added so far is done or abandoned, or ctx ends.
func (q *settles) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { q.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SettleStats counts what the settle queue did since the gateway started.
type SettleStats struct {
	Queued    int    // settles waiting for a worker now
	Retried   uint64 // settles sent again after a failure
	Abandoned uint64 // settles that failed every retry: their holds are charged in full at lease end
	Inline    uint64 // settles run on the request because the queue was full
}

// SettleStats reports the settle queue's counts.
func (g *Gateway) SettleStats() SettleStats {
	q := g.settles
	return SettleStats{Queued: len(q.queue), Retried: q.retried.Load(), Abandoned: q.abandoned.Load(), Inline: q.inline.Load()}
}

// DrainSettles waits until every settle queued or waiting to retry is done, or
// ctx ends: a replica shutting down calls it after its last request.
func (g *Gateway) DrainSettles(ctx context.Context) error { return g.settles.drain(ctx) }
