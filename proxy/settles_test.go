package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy/apikey"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// gatedLimiter is the shared Redis limiter with its settles held back until
// open is closed, and the first failures of them failing.
type gatedLimiter struct {
	limiter.Limiter
	open     chan struct{}
	failures atomic.Int32
	settles  atomic.Int32 // settles that reached Redis
	carried  atomic.Int32 // of which sent ahead of an admission
}

var errInjected = errors.New("injected settle failure")

func (l *gatedLimiter) Settle(ctx context.Context, s limiter.Settlement) (limiter.SettleResult, error) {
	<-l.open
	if l.failures.Add(-1) >= 0 {
		return limiter.SettleResult{}, errInjected
	}
	l.settles.Add(1)
	return l.Limiter.Settle(ctx, s)
}

func (l *gatedLimiter) SettleAll(ctx context.Context, ss []limiter.Settlement) []error {
	errs := make([]error, len(ss))
	for i, s := range ss {
		_, errs[i] = l.Settle(ctx, s)
	}
	return errs
}

// AdmitAfter sends ss only once the gate is open; before, it leaves them to the queue.
func (l *gatedLimiter) AdmitAfter(ctx context.Context, ss []limiter.Settlement, req limiter.Request) (limiter.Decision, []error, error) {
	errs := make([]error, len(ss))
	select {
	case <-l.open:
		errs = l.SettleAll(ctx, ss)
		l.carried.Add(int32(len(ss)))
	default:
		for i := range errs {
			errs[i] = limiter.ErrSettleNotSent
		}
	}
	d, err := l.Limiter.Admit(ctx, req)
	return d, errs, err
}

// paidGateway serves one member with a $1 total budget on a paid Anthropic
// route to an upstream that reports 10 input and 20 output tokens.
type paidGateway struct {
	g       *Gateway
	url     string
	key     string
	lim     *gatedLimiter
	cost    int64 // what one request really costs
	budget  int64
	release func()
}

func newPaidGateway(t *testing.T) *paidGateway {
	t.Helper()
	return newGatewayFor(t, limiter.Policy{Budget: &limiter.Budget{Limit: paidBudget, Period: limiter.PeriodTotal}})
}

const paidBudget = 1_000_000

// newGatewayFor is newPaidGateway with the member's limits given.
func newGatewayFor(t *testing.T, limits limiter.Policy) *paidGateway {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],`+
			`"usage":{"input_tokens":10,"output_tokens":20}}`)
	}))
	t.Cleanup(upstream.Close)
	u, _ := url.Parse(upstream.URL)
	price := estimate.Price{Model: "claude-test", InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000, CacheWritePerMTok: 3_750_000,
		CacheReadPerMTok: 300_000, MaxOutputTokens: 1000}
	k := apikey.Generate()
	snap := NewSnapshot(
		[]Team{{ID: 1}},
		[]Key{{ID: k.ID, TeamID: 1, MemberID: 1, SecretHash: k.SecretHash}},
		[]Member{{ID: 1, TeamID: 1, Limits: limits}},
		[]Route{{ID: 1, TeamID: 1, Prefix: "/anthropic", Targets: []Target{NewTarget(u, "ANTHROPIC_API_KEY")}, Dialect: DialectAnthropic,
			CredentialHeader: "x-api-key", CredentialFormat: "{}"}},
		estimate.Table{"claude-test": price}, time.Now())
	lim := &gatedLimiter{Limiter: limiter.NewRedis(redistest.Client(t), limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: 5 * time.Second}),
		open: make(chan struct{})}
	g := New(Options{Snapshots: staticSource{snap}, Getenv: func(string) string { return "provider-secret" }, Limiter: lim, Transport: loopbackTransport(),
		Rebuild: func(context.Context, int64) (limiter.TeamState, error) {
			return limiter.TeamState{At: time.Now(), Members: map[string]map[limiter.Period]int64{"1": {limiter.PeriodTotal: 0}}}, nil
		}})
	g.settles.backoff = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	var released atomic.Bool
	release := func() {
		if released.CompareAndSwap(false, true) {
			close(lim.open)
		}
	}
	t.Cleanup(release)
	// 10 input at $3 and 20 output at $15 per million tokens, rounded up once.
	return &paidGateway{g: g, url: srv.URL, key: k.Plaintext, lim: lim, cost: (10*3_000_000 + 20*15_000_000 + 999_999) / 1_000_000,
		budget: paidBudget, release: release}
}

// call sends one Messages request and reads its whole answer.
func (p *paidGateway) call(t *testing.T) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+"/anthropic/v1/messages",
		strings.NewReader(`{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", p.key)
	req.Header.Set("content-type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func (p *paidGateway) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.g.DrainSettles(ctx); err != nil {
		t.Fatalf("settles not drained: %v", err)
	}
}

// TestSettleRunsAfterTheResponse: the caller has its whole answer while the
// limiter's SETTLE is still held back, so SETTLE is not on the request's path;
// once it runs, the member is charged what the provider reported.
func TestSettleRunsAfterTheResponse(t *testing.T) {
	t.Parallel()
	p := newPaidGateway(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if status, _, body := p.call(t); status != http.StatusOK {
			t.Errorf("%d %s", status, body)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the response waited for SETTLE")
	}
	if n := p.lim.settles.Load(); n != 0 {
		t.Fatalf("%d settles ran before they were let through", n)
	}
	p.release()
	p.drain(t)
	if n := p.lim.settles.Load(); n != 1 {
		t.Fatalf("%d settles ran, want 1", n)
	}
	assertCharged(t, p, p.cost)
}

// TestSettleOnlyWhatHolds: a request that holds nothing in the limiter (no
// budget, TPM limit or concurrency cap applies) is not settled at all; one that
// takes a concurrency slot is, and the slot comes back.
func TestSettleOnlyWhatHolds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		limits  limiter.Policy
		settles int32
	}{
		{"no limits", limiter.Policy{}, 0},
		{"a rate limit", limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmTokenBucket, Limit: 100, Period: time.Second}}, 0},
		{"one request in flight", limiter.Policy{Concurrency: 1}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newGatewayFor(t, c.limits)
			p.release()
			for range 3 {
				if status, _, body := p.call(t); status != http.StatusOK {
					t.Fatalf("%d %s", status, body)
				}
				p.drain(t)
			}
			if n := p.lim.settles.Load(); n != c.settles {
				t.Fatalf("%d settles, want %d", n, c.settles)
			}
		})
	}
}

// TestFailedSettleIsRetried: settles that fail are sent again until one lands,
// so the member is charged the real usage, not the whole hold at lease end.
func TestFailedSettleIsRetried(t *testing.T) {
	t.Parallel()
	p := newPaidGateway(t)
	p.lim.failures.Store(2)
	p.release()
	if status, _, body := p.call(t); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	p.drain(t)
	if st := p.g.SettleStats(); st.Retried != 2 || st.Abandoned != 0 {
		t.Fatalf("stats %+v, want 2 retries and nothing abandoned", st)
	}
	assertCharged(t, p, p.cost)
}

// TestSettleAbandonedAfterEveryRetry: a settle that never lands is given up
// after the last retry, its hold left for the lease to end.
func TestSettleAbandonedAfterEveryRetry(t *testing.T) {
	t.Parallel()
	p := newPaidGateway(t)
	p.lim.failures.Store(1 << 30)
	p.release()
	if status, _, body := p.call(t); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	p.drain(t)
	if st := p.g.SettleStats(); st.Retried != 3 || st.Abandoned != 1 {
		t.Fatalf("stats %+v, want 3 retries and 1 abandoned", st)
	}
}

// assertCharged checks, with one more request, that the budget has want spent
// and nothing else held.
func assertCharged(t *testing.T, p *paidGateway, want int64) {
	t.Helper()
	status, h, body := p.call(t)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	left, _ := strconv.ParseInt(h.Get("X-Budget-Remaining-Micros"), 10, 64)
	// The probe's hold is the same for every call of this body: find it from a
	// fresh gateway's first answer, which has nothing spent.
	fresh := newPaidGateway(t)
	fresh.release()
	_, fh, _ := fresh.call(t)
	freshLeft, _ := strconv.ParseInt(fh.Get("X-Budget-Remaining-Micros"), 10, 64)
	if spent := freshLeft - left; spent != want {
		t.Fatalf("spent %d, want %d (the real cost, not the hold of %d)", spent, want, p.budget-freshLeft)
	}
}

// stepLimiter holds each settle back until its request id's channel is closed.
type stepLimiter struct {
	limiter.Limiter
	release map[string]chan struct{}
}

func (l stepLimiter) Settle(ctx context.Context, s limiter.Settlement) (limiter.SettleResult, error) {
	<-l.release[s.RequestID]
	return l.Limiter.Settle(ctx, s)
}

// TestClaimWaitsForEarlierSettlesOnly: a member's admission waits for the
// settles others were sending when it came, and not for one added after it (a
// member with requests in flight all the time would otherwise wait for ever).
func TestClaimWaitsForEarlierSettlesOnly(t *testing.T) {
	t.Parallel()
	lim := stepLimiter{Limiter: limiter.NewLocal(nil), release: map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}}
	q := newSettles(lim, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	q.add(ctx, limiter.Settlement{Team: "1", Member: "7", RequestID: "first"})
	time.Sleep(50 * time.Millisecond) // past the linger: a worker takes it alone
	type claimed struct {
		jobs []*settleJob
		took time.Duration
	}
	waited := make(chan claimed)
	go func() {
		start := time.Now()
		jobs := q.claim(ctx, "1", "7", 10*time.Second)
		waited <- claimed{jobs, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond)
	q.add(ctx, limiter.Settlement{Team: "1", Member: "7", RequestID: "second"})
	select {
	case <-waited:
		t.Fatal("returned before the earlier settle was done")
	case <-time.After(100 * time.Millisecond):
	}
	close(lim.release["first"])
	select {
	case c := <-waited:
		if c.took > 5*time.Second || len(c.jobs) != 0 {
			t.Fatalf("waited %s and took %d settles, want none: the worker was sending it", c.took, len(c.jobs))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting once the earlier settle was done: it waited for the later one too")
	}
	close(lim.release["second"])
	if err := q.drain(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing queued: no wait at all.
	start := time.Now()
	if jobs := q.claim(ctx, "1", "7", 10*time.Second); len(jobs) != 0 || time.Since(start) > time.Second {
		t.Fatalf("claimed %d and waited %s with nothing queued", len(jobs), time.Since(start))
	}
}

// TestAdmissionCarriesTheMembersLastSettle: a member calling one request after
// another has each earlier settle sent ahead of its next ADMIT in the same
// round trip, not by a worker, and is charged exactly what each really cost.
func TestAdmissionCarriesTheMembersLastSettle(t *testing.T) {
	t.Parallel()
	p := newPaidGateway(t)
	p.g.settles.linger = time.Hour // no worker takes a settle before the next request
	p.release()
	const n = 5
	for range n {
		if status, _, body := p.call(t); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
	}
	if got := p.lim.carried.Load(); got != n-1 {
		t.Fatalf("%d settles rode with an admission, want %d", got, n-1)
	}
	// The last one is still lingering; DrainSettles sends it now.
	p.drain(t)
	if got := p.lim.settles.Load(); got != n {
		t.Fatalf("%d settles reached Redis, want %d", got, n)
	}
	assertCharged(t, p, (n)*p.cost)
}

// TestWorkerLeavesLingeringSettles: a worker sending one member's due settle
// does not take another member's (or the same member's) settle that is still
// lingering: that one is left for the next admission to carry, which would
// otherwise wait for the worker's round trip.
func TestWorkerLeavesLingeringSettles(t *testing.T) {
	t.Parallel()
	lim := &countingLimiter{Limiter: limiter.NewLocal(nil)}
	q := newSettles(lim, slog.New(slog.DiscardHandler))
	q.linger = 200 * time.Millisecond
	ctx := context.Background()
	// One due settle for each worker, so that every worker is busy with one
	// when the lingering settle is queued.
	for i := range settleWorkers {
		q.add(ctx, limiter.Settlement{Team: "1", Member: "7", RequestID: "due" + strconv.Itoa(i)})
	}
	time.Sleep(150 * time.Millisecond)
	q.add(ctx, limiter.Settlement{Team: "1", Member: "8", RequestID: "lingering"})
	// The first ones are due at 200 ms and the workers send them then; the
	// last is due only at 350 ms.
	deadline := time.Now().Add(5 * time.Second)
	for lim.settled.Load() < settleWorkers && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	jobs := q.claim(ctx, "1", "8", time.Second)
	if len(jobs) != 1 || jobs[0].s.RequestID != "lingering" {
		t.Fatalf("claimed %d settles, want the lingering one: the worker took it with the due one", len(jobs))
	}
	q.finish(jobs, make([]error, len(jobs)))
	if err := q.drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lim.settled.Load(); got != settleWorkers {
		t.Fatalf("%d settles sent by workers, want only the %d due ones", got, settleWorkers)
	}
}

// countingLimiter counts the settles workers send.
type countingLimiter struct {
	limiter.Limiter
	settled atomic.Int64
}

func (l *countingLimiter) Settle(ctx context.Context, s limiter.Settlement) (limiter.SettleResult, error) {
	l.settled.Add(1)
	return l.Limiter.Settle(ctx, s)
}

func (l *countingLimiter) SettleAll(ctx context.Context, ss []limiter.Settlement) []error {
	l.settled.Add(int64(len(ss)))
	return l.Limiter.SettleAll(ctx, ss)
}

// TestClaimCarriesAFewSettles: when many of a member's requests end at once,
// one admission carries only a few of their settles; the rest are left to the
// workers instead of riding inside one ADMIT's timeout.
func TestClaimCarriesAFewSettles(t *testing.T) {
	t.Parallel()
	q := newSettles(limiter.NewLocal(nil), slog.New(slog.DiscardHandler))
	q.linger = time.Hour
	ctx := context.Background()
	for i := range 10 {
		q.add(ctx, limiter.Settlement{Team: "1", Member: "7", RequestID: "r" + strconv.Itoa(i)})
	}
	jobs := q.claim(ctx, "1", "7", 10*time.Second)
	if len(jobs) != maxCarried || jobs[0].s.RequestID != "r0" {
		t.Fatalf("claimed %d settles starting at %q, want the oldest %d", len(jobs), jobs[0].s.RequestID, maxCarried)
	}
	if n := q.queued(); n != 10-maxCarried {
		t.Fatalf("%d left for the workers, want %d", n, 10-maxCarried)
	}
	q.finish(jobs, make([]error, len(jobs)))
	if err := q.drain(ctx); err != nil {
		t.Fatal(err)
	}
}
