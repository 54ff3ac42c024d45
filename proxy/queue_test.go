package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy/apikey"
)

// queueGateway serves a team whose limit is one request in flight, for members
// 1 and 2 (one key each), with the waiting room's budget wait. The upstream
// answers a request once its release channel is closed, or at once when the
// request has none (path /p/now).
type queueGateway struct {
	url     string
	keys    [2]string
	lim     *leaveCounter
	release chan struct{}
	once    sync.Once
	obs     *queueObs
}

// let lets every held upstream request answer.
func (q *queueGateway) let() { q.once.Do(func() { close(q.release) }) }

// leaveCounter is a Local limiter that counts Leave calls.
type leaveCounter struct {
	*limiter.Local
	leaves atomic.Int64
}

func (l *leaveCounter) Leave(ctx context.Context, team, requestID string) error {
	l.leaves.Add(1)
	return l.Local.Leave(ctx, team, requestID)
}

type queueObs struct {
	mu      sync.Mutex
	waiting int
	queued  []time.Duration
}

func (o *queueObs) Started(int64, int64) {}
func (o *queueObs) Finished(out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queued = append(o.queued, out.Queued)
}
func (o *queueObs) Queued(_, _ int64, delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waiting += delta
}

func newQueueGateway(t *testing.T, wait time.Duration) *queueGateway {
	t.Helper()
	q := &queueGateway{lim: &leaveCounter{Local: limiter.NewLocal(nil)}, release: make(chan struct{}), obs: &queueObs{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/now") {
			<-q.release
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	var keys []Key
	for i := range q.keys {
		g := apikey.Generate()
		keys = append(keys, Key{ID: g.ID, TeamID: 1, MemberID: int64(i + 1), SecretHash: g.SecretHash})
		q.keys[i] = g.Plaintext
	}
	snap := NewSnapshot([]Team{{ID: 1, Limits: limiter.Policy{Concurrency: 1}}}, keys,
		[]Member{{ID: 1, TeamID: 1, Weight: 1}, {ID: 2, TeamID: 1, Weight: 8}},
		[]Route{{ID: 1, TeamID: 1, Prefix: "/p", Targets: []Target{NewTarget(u, "ANTHROPIC_API_KEY")}, Dialect: DialectAnthropic,
			CredentialHeader: "x-api-key", CredentialFormat: "{}"}},
		nil, time.Now())
	srv := httptest.NewServer(New(Options{Snapshots: staticSource{snap}, Getenv: func(string) string { return "secret" },
		Limiter: q.lim, QueueWait: wait, Observers: []Observer{q.obs}, Transport: loopbackTransport()}))
	t.Cleanup(srv.Close)
	// Before the servers close: a failed test must not leave requests held.
	t.Cleanup(q.let)
	q.url = srv.URL
	return q
}

// send runs a GET as member i (0 or 1) in the background and reports its
// response, or nil if ctx ended it.
func (q *queueGateway) send(ctx context.Context, t *testing.T, i int, path string) <-chan *http.Response {
	out := make(chan *http.Response, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, q.url+path, nil)
	req.Header.Set("x-api-key", q.keys[i])
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- nil
			return
		}
		resp.Body.Close()
		out <- resp
	}()
	return out
}

func (q *queueGateway) waiting() int {
	q.obs.mu.Lock()
	defer q.obs.mu.Unlock()
	return q.obs.waiting
}

// TestQueueWaitsForTurn: with the team's one slot taken, a second member's
// request waits instead of getting 429, is admitted when the slot comes back,
// and says how long it waited; the first request, which never waited, does not.
func TestQueueWaitsForTurn(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 5*time.Second)
	first := q.send(context.Background(), t, 0, "/p/hold")
	waitFor(t, q.inFlight)
	second := q.send(context.Background(), t, 1, "/p/now")
	waitFor(t, func() bool { return q.waiting() == 1 })
	time.Sleep(200 * time.Millisecond)
	q.let()
	r1, r2 := <-first, <-second
	if r1 == nil || r2 == nil || r1.StatusCode != http.StatusOK || r2.StatusCode != http.StatusOK {
		t.Fatalf("responses %v %v", r1, r2)
	}
	if h := r1.Header.Get(QueuedHeader); h != "" {
		t.Fatalf("the first request never waited, but says %s ms", h)
	}
	ms, err := strconv.Atoi(r2.Header.Get(QueuedHeader))
	if err != nil || ms < 200 || ms > 3000 {
		t.Fatalf("%s %q, want about 200-300 ms", QueuedHeader, r2.Header.Get(QueuedHeader))
	}
	if q.waiting() != 0 {
		t.Fatalf("%d still counted as waiting", q.waiting())
	}
}

// TestQueueWaitBounded: a request that cannot get its turn within the wait
// budget is answered 429 by the budget's end (up to one poll before it, when the
// limiter sees the rest of the budget cannot be enough), saying how long it
// waited, and its ticket is out of the room.
func TestQueueWaitBounded(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	q := newQueueGateway(t, wait)
	_ = q.send(context.Background(), t, 0, "/p/hold")
	waitFor(t, q.inFlight)
	start := time.Now()
	r := <-q.send(context.Background(), t, 1, "/p/now")
	took := time.Since(start)
	if r == nil || r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("response %+v", r)
	}
	early := wait - 60*time.Millisecond
	if ms, _ := strconv.Atoi(r.Header.Get(QueuedHeader)); took < early || took > wait+time.Second || ms < 240 || ms > 1300 {
		t.Fatalf("answered after %s, %s %q; want just past %s", took, QueuedHeader, r.Header.Get(QueuedHeader), wait)
	}
	if depth := q.roomDepth(); depth != 0 {
		t.Fatalf("%d tickets in the room: the ticket should have left", depth)
	}
}

// TestQueueCallerGoneLeaves: a waiting caller that disconnects takes its ticket
// out of the room at once, not when its lease ends.
func TestQueueCallerGoneLeaves(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 10*time.Second)
	_ = q.send(context.Background(), t, 0, "/p/hold")
	waitFor(t, q.inFlight)
	ctx, cancel := context.WithCancel(context.Background())
	gone := q.send(ctx, t, 1, "/p/now")
	waitFor(t, func() bool { return q.waiting() == 1 })
	cancel()
	if r := <-gone; r != nil {
		t.Fatalf("a cancelled request answered %d", r.StatusCode)
	}
	waitFor(t, func() bool { return q.lim.leaves.Load() == 1 })
	if depth := q.roomDepth(); depth != 0 {
		t.Fatalf("%d tickets in the room after the caller left", depth)
	}
}

// probe is a request of the team's from outside the gateway.
func probe(wait time.Duration) limiter.Request {
	return limiter.Request{Team: "1", Member: "probe", RequestID: "probe-" + strconv.FormatInt(time.Now().UnixNano(), 10),
		TeamPolicy: limiter.Policy{Concurrency: 1}, Lease: time.Minute, QueueWait: wait}
}

// roomDepth is how many tickets the team's waiting room holds, with the
// team's slot taken: a probe queues behind them all, then leaves.
func (q *queueGateway) roomDepth() int64 {
	p := probe(time.Second)
	d, _ := q.lim.Local.Admit(context.Background(), p)
	_ = q.lim.Local.Leave(context.Background(), "1", p.RequestID)
	return d.QueueDepth - 1
}

// inFlight reports whether the team's one slot is taken (a probe is refused).
func (q *queueGateway) inFlight() bool {
	p := probe(0)
	d, _ := q.lim.Admit(context.Background(), p)
	if d.Allowed {
		_, _ = q.lim.Settle(context.Background(), limiter.Settlement{Team: "1", Member: "probe", RequestID: p.RequestID})
	}
	return !d.Allowed
}
