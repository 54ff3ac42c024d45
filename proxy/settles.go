package proxy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
// A settle lingers briefly before a worker takes it, so that the member's next
// paid admission usually takes it instead (claim) and sends it in the same
// round trip as its ADMIT, ahead of it (limiter.AdmitAfter): the member is then
// admitted against what its last request really cost, for no extra round
// trip. Workers take what has queued up (up to settleBatch) and settle it in
// one round trip. When the queue is full the request settles inline, which
// slows that request rather than forgetting its settle.
type settles struct {
	lim   limiter.Limiter
	log   *slog.Logger
	queue chan *settleJob
	// backoff is the wait before each retry; a settle still failing after the
	// last is abandoned (its hold is charged in full when its lease ends).
	backoff []time.Duration
	linger  time.Duration // settleLinger; tests change it
	// hurry is closed by drain: a replica shutting down lingers no more.
	hurry     chan struct{}
	hurryOnce sync.Once

	workers atomic.Int32
	pending sync.WaitGroup // jobs queued, being settled or waiting to retry

	// byMember holds each member's settles not yet done, so that the member's
	// next paid admission on this replica can take them or wait for them.
	mu       sync.Mutex
	byMember map[memberRef]*memberSettles

	retried, abandoned, inline atomic.Uint64
}

type memberRef struct{ team, member string }

// memberSettles is one member's settles not yet done, in the order added, and a
// channel closed (and replaced) each time one is done.
type memberSettles struct {
	jobs     []*settleJob
	progress chan struct{}
}

type settleJob struct {
	// ctx is the request's, without its cancellation: it carries the request's
	// trace to the settle's span.
	ctx     context.Context
	s       limiter.Settlement
	attempt int       // retries so far
	due     time.Time // when a worker takes it
	// taken is set by the worker or admission that sends it, and cleared when
	// it goes back to the queue.
	taken atomic.Bool
	done  bool // under settles.mu
}

const (
	settleQueueDepth = 8192
	settleWorkers    = 4
	settleBatch      = 64
	// settleLinger is how long a settle waits for its member's next admission to
	// take it before a worker does: about one request's time at 1000 req/s.
	settleLinger = 2 * time.Millisecond
	// maxCarried bounds the settles one admission carries, so that a member
	// whose many requests end at once (a burst's answers) does not put them all
	// ahead of one ADMIT and inside its timeout; workers send the rest.
	maxCarried = 4
	// settleWorkerIdle is how long a worker waits for work before it exits.
	settleWorkerIdle = time.Second
)

// settleBackoff reaches about a minute in all: enough for a Redis restart or
// failover, and far inside the hold's lease, after which retrying is useless.
var settleBackoff = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second,
	10 * time.Second, 15 * time.Second, 30 * time.Second}

func newSettles(lim limiter.Limiter, log *slog.Logger) *settles {
	return &settles{lim: lim, log: log, queue: make(chan *settleJob, settleQueueDepth), backoff: settleBackoff,
		linger: settleLinger, hurry: make(chan struct{}), byMember: map[memberRef]*memberSettles{}}
}

// add settles s after the caller returns, or now if the queue is full.
func (q *settles) add(ctx context.Context, s limiter.Settlement) {
	q.pending.Add(1)
	j := &settleJob{ctx: ctx, s: s, due: time.Now().Add(q.linger)}
	ref := memberRef{s.Team, s.Member}
	q.mu.Lock()
	m := q.byMember[ref]
	if m == nil {
		m = &memberSettles{progress: make(chan struct{})}
		q.byMember[ref] = m
	}
	m.jobs = append(m.jobs, j)
	q.mu.Unlock()
	q.enqueue(j)
}

// enqueue puts j in the queue for a worker, or settles it now when the queue is full.
func (q *settles) enqueue(j *settleJob) {
	select {
	case q.queue <- j:
		q.spawn()
	default:
		if q.take(j) {
			q.inline.Add(1)
			q.settle([]*settleJob{j})
		}
	}
}

// take claims j for the caller to send, unless another took it first.
func (q *settles) take(j *settleJob) bool {
	return j.taken.CompareAndSwap(false, true)
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
	batch := make([]*settleJob, 0, settleBatch)
	// next is a job this worker took from the queue while gathering a batch
	// and left for the next one, because it was not due yet.
	var next *settleJob
	for {
		j := next
		next = nil
		if j == nil {
			select {
			case j = <-q.queue:
			case <-idle.C:
				q.workers.Add(-1)
				// A job queued while this worker was deciding to leave finds no one.
				if len(q.queue) > 0 {
					q.spawn()
				}
				return
			}
		}
		if wait := time.Until(j.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-q.hurry:
			}
			t.Stop()
		}
		batch = batch[:0]
		if q.take(j) {
			batch = append(batch, j)
		}
		// The batch takes what is due, and stops at the first job still
		// lingering: its member's next admission is about to carry it, and
		// taking it here would make that admission wait for this batch instead.
	drain:
		for len(batch) < settleBatch {
			select {
			case j := <-q.queue:
				if time.Until(j.due) > 0 && !q.hurried() {
					next = j
					break drain
				}
				if q.take(j) {
					batch = append(batch, j)
				}
			default:
				break drain
			}
		}
		if len(batch) > 0 {
			q.settle(batch)
		}
		idle.Reset(settleWorkerIdle)
	}
}

// hurried reports whether drain has begun: nothing lingers any more.
func (q *settles) hurried() bool {
	select {
	case <-q.hurry:
		return true
	default:
		return false
	}
}

// settle runs one batch and schedules a retry for each settle that failed.
func (q *settles) settle(batch []*settleJob) {
	if len(batch) == 1 {
		// One call keeps the settle's span a child of its request's trace.
		_, err := q.lim.Settle(batch[0].ctx, batch[0].s)
		q.finish(batch, []error{err})
		return
	}
	q.finish(batch, q.lim.SettleAll(context.Background(), settlements(batch)))
}

func settlements(jobs []*settleJob) []limiter.Settlement {
	ss := make([]limiter.Settlement, len(jobs))
	for i, j := range jobs {
		ss[i] = j.s
	}
	return ss
}

// finish records what became of jobs that were sent (errs[i] is jobs[i]'s),
// and schedules a retry for each that failed.
func (q *settles) finish(jobs []*settleJob, errs []error) {
	for i, j := range jobs {
		err := errs[i]
		switch {
		case err == nil:
			q.done(j)
		case errors.Is(err, limiter.ErrSettleNotSent):
			j.due = time.Time{}
			q.requeue(j)
		case j.attempt == len(q.backoff):
			q.abandoned.Add(1)
			q.log.LogAttrs(j.ctx, slog.LevelError, SettleFailedMsg, slog.String("request_id", j.s.RequestID),
				slog.Int("attempts", j.attempt+1), slog.Any("err", err))
			q.done(j)
		default:
			q.retried.Add(1)
			wait := q.backoff[j.attempt]
			j.attempt++
			j.due = time.Time{}
			time.AfterFunc(wait, func() { q.requeue(j) })
		}
	}
}

func (q *settles) done(j *settleJob) {
	ref := memberRef{j.s.Team, j.s.Member}
	q.mu.Lock()
	j.done = true
	if m := q.byMember[ref]; m != nil {
		if i := slices.Index(m.jobs, j); i >= 0 {
			m.jobs = slices.Delete(m.jobs, i, i+1)
		}
		close(m.progress)
		m.progress = make(chan struct{})
		if len(m.jobs) == 0 {
			delete(q.byMember, ref)
		}
	}
	q.mu.Unlock()
	q.pending.Done()
}

// claim takes the member's settles that nobody has sent yet (at most
// maxCarried, oldest first), for the caller to send ahead of the member's
// admission, and waits, at most max, for those that others are sending (a
// worker, another admission, a retry's backoff). A paid
// admission calls it first, so that a member sending one request after
// another is admitted against what the last one really cost, not its hold:
// that keeps the overspend bound at one request's under-estimate for a member
// calling one at a time. It never waits for settles added after it (a member
// with many requests in flight would wait for ever), and settles still failing
// past max keep their holds, which the admission counts.
func (q *settles) claim(ctx context.Context, team, member string, max time.Duration) []*settleJob {
	ref := memberRef{team, member}
	q.mu.Lock()
	m := q.byMember[ref]
	if m == nil {
		q.mu.Unlock()
		return nil
	}
	var mine, others []*settleJob
	for _, j := range m.jobs {
		switch {
		case len(mine) < maxCarried && q.take(j):
			mine = append(mine, j)
		case j.taken.Load():
			others = append(others, j)
		}
	}
	q.mu.Unlock()
	if len(others) == 0 {
		return mine
	}
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		q.mu.Lock()
		others = slices.DeleteFunc(others, func(j *settleJob) bool { return j.done })
		progress := m.progress
		q.mu.Unlock()
		if len(others) == 0 {
			return mine
		}
		select {
		case <-progress:
		case <-t.C:
			return mine
		case <-ctx.Done():
			return mine
		}
	}
}

// requeue puts a job to retry back in the queue, or settles it on the timer's
// goroutine when the queue is full.
func (q *settles) requeue(j *settleJob) {
	j.taken.Store(false)
	q.enqueue(j)
}

// drain waits until every settle added so far is done or abandoned, or ctx ends.
func (q *settles) drain(ctx context.Context) error {
	q.hurryOnce.Do(func() { close(q.hurry) })
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

// queued counts the settles that nobody has taken to send.
func (q *settles) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range q.byMember {
		for _, j := range m.jobs {
			if !j.taken.Load() {
				n++
			}
		}
	}
	return n
}

// SettleStats reports the settle queue's counts.
func (g *Gateway) SettleStats() SettleStats {
	q := g.settles
	return SettleStats{Queued: q.queued(), Retried: q.retried.Load(), Abandoned: q.abandoned.Load(), Inline: q.inline.Load()}
}

// DrainSettles waits until every settle queued or waiting to retry is done, or
// ctx ends: a replica shutting down calls it after its last request.
func (g *Gateway) DrainSettles(ctx context.Context) error { return g.settles.drain(ctx) }
