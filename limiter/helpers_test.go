package limiter_test

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// epoch is where injected clocks start: a realistic Redis TIME, so the script's
// microsecond arithmetic runs at full size.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// clock is an injected clock, shared by a Redis limiter and its Local twin.
type clock struct{ us atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.us.Store(epoch.UnixMicro())
	return c
}

func (c *clock) Now() time.Time          { return time.UnixMicro(c.us.Load()) }
func (c *clock) Advance(d time.Duration) { c.us.Add(int64(d / time.Microsecond)) }

// testTimeout bounds Redis calls in tests that are not about timeouts: generous,
// since tests share two cores and run with -race.
const testTimeout = 5 * time.Second

// newRedis returns a limiter on its own client (its own pool), under prefix.
func newRedis(t testing.TB, prefix string, now func() time.Time) *limiter.Redis {
	t.Helper()
	return limiter.NewRedis(redistest.Client(t), limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: now})
}

var requestSeq atomic.Int64

// rid returns a request id unique in the test binary. Ids sort in the order
// they were made: the waiting room breaks a tie between tickets by id, and a
// test that expects the earlier ticket first must not depend on how many
// parallel tests took ids before it ("req-10" sorts before "req-9").
func rid() string { return fmt.Sprintf("req-%012d", requestSeq.Add(1)) }

func tokenBucket(limit int64, period time.Duration, burst int64) *limiter.Rate {
	return &limiter.Rate{Algorithm: limiter.AlgorithmTokenBucket, Limit: limit, Period: period, Burst: burst}
}

func slidingWindow(limit int64, period time.Duration) *limiter.Rate {
	return &limiter.Rate{Algorithm: limiter.AlgorithmSlidingWindow, Limit: limit, Period: period}
}

func admit(t testing.TB, l limiter.Limiter, req limiter.Request) limiter.Decision {
	t.Helper()
	if req.RequestID == "" {
		req.RequestID = rid()
	}
	d, err := l.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("admit %s/%s: %v", req.Team, req.Member, err)
	}
	return d
}

// release settles a request that never reached the upstream: cost 0, tokens 0.
func release(ctx context.Context, l limiter.Limiter, team, member, id string) error {
	_, err := l.Settle(ctx, limiter.Settlement{Team: team, Member: member, RequestID: id})
	return err
}

// settle settles s and fails the test on an error.
func settle(t testing.TB, l limiter.Limiter, s limiter.Settlement) limiter.SettleResult {
	t.Helper()
	r, err := l.Settle(context.Background(), s)
	if err != nil {
		t.Fatalf("settle %s/%s %s: %v", s.Team, s.Member, s.RequestID, err)
	}
	return r
}

// rebuildEmpty marks a team's counters as rebuilt with no spend, as the gateway does
// for a team whose ledger is empty; until then Admit refuses budget and TPM requests.
// now is the limiter's clock (nil: time.Now).
func rebuildEmpty(t testing.TB, l limiter.Limiter, team string, now func() time.Time) {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	if err := l.Rebuild(context.Background(), team, limiter.TeamState{At: now()}); err != nil {
		t.Fatalf("rebuild %s: %v", team, err)
	}
}

// sameDecision compares decisions, treating every nonzero Epoch as equal: Redis and
// Local number their generations differently.
// onBoth runs f on each limiter, a Redis one and its Local twin, and stops the
// test at the first error.
func onBoth(t *testing.T, f func(l limiter.Limiter) error, ls ...limiter.Limiter) {
	t.Helper()
	for _, l := range ls {
		if err := f(l); err != nil {
			t.Fatal(err)
		}
	}
}

func sameDecision(a, b limiter.Decision) bool {
	a.Epoch, b.Epoch = min(a.Epoch, 1), min(b.Epoch, 1)
	// How far the counters had come is Redis's alone: Local never loses them.
	a.TeamEpoch, a.Seq, b.TeamEpoch, b.Seq = 0, 0, 0, 0
	return reflect.DeepEqual(a, b)
}

// roundTrips counts the round trips a client makes to Redis for its calls, and
// the commands they carry, leaving out those that set up a new connection
// (HELLO, CLIENT SETINFO): a connection dialled again mid-test is not the code
// under test.
type roundTrips struct{ n, cmds atomic.Int64 }

func connectionSetup(cmds ...redis.Cmder) bool {
	for _, c := range cmds {
		if n := c.Name(); n != "hello" && n != "client" {
			return false
		}
	}
	return true
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !connectionSetup(cmd) {
			h.n.Add(1)
			h.cmds.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !connectionSetup(cmds...) {
			h.n.Add(1)
			h.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}
