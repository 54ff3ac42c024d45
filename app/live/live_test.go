package live_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// clock is a settable time for Options.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }

// t0 is 12:00:05 UTC, in the first 10-second slot of its minute.
var t0 = time.Date(2026, 11, 30, 12, 0, 5, 0, time.UTC)

const team, ada, bob = int64(7), int64(21), int64(22)

// request reports one admitted request that cost costMicros and used tokens.
func request(s *live.Stats, member int64, status int, costMicros int64, tokens int64) {
	s.Started(team, member)
	s.Finished(proxy.Outcome{TeamID: team, MemberID: member, Admitted: true, Status: status, CostMicros: costMicros,
		Usage: usage.Usage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2}})
}

// refused reports a request refused before it went upstream.
func refused(s *live.Stats, member int64, status int, code string) {
	s.Finished(proxy.Outcome{TeamID: team, MemberID: member, Status: status, Refusal: code})
}

func read(t *testing.T, s *live.Stats) live.Team {
	t.Helper()
	got, err := s.Team(t.Context(), team)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantCounts(t *testing.T, what string, got, want live.Counts) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// replicas returns n Stats sharing one Redis prefix, as n gateway replicas do.
func replicas(t *testing.T, n int, c *clock, o live.Options) []*live.Stats {
	t.Helper()
	o.Prefix, o.Now = redistest.Prefix(t), c.now
	var out []*live.Stats
	for range n {
		out = append(out, live.New(redistest.Client(t), o))
	}
	return out
}

func flush(t *testing.T, ss ...*live.Stats) {
	t.Helper()
	for _, s := range ss {
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCountsAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	rs := replicas(t, 2, c, live.Options{})
	a, b := rs[0], rs[1]

	request(a, ada, 200, 1500, 100)
	request(b, ada, 200, 2500, 300)
	refused(b, ada, 429, "rate")
	refused(a, ada, 402, "budget")
	refused(a, ada, 403, "cut_off")
	request(b, bob, 200, 10, 4)
	// Two of bob's waited in the fair waiting room: one admitted, one refused.
	a.Started(team, bob)
	a.Finished(proxy.Outcome{TeamID: team, MemberID: bob, Admitted: true, Status: 200, Queued: 140 * time.Millisecond})
	b.Finished(proxy.Outcome{TeamID: team, MemberID: bob, Status: 429, Refusal: "queued", Queued: 3 * time.Second})
	b.Finished(proxy.Outcome{Status: 401, Refusal: "invalid_key"}) // no team: not counted
	if got := read(t, a); len(got.Members) != 0 || got.LastMinute != (live.Counts{}) {
		t.Errorf("before any flush a reader sees %+v, want nothing", got.LastMinute)
	}
	flush(t, a, b)

	for name, r := range map[string]*live.Stats{"replica a": a, "replica b": b} {
		got := read(t, r)
		wantCounts(t, name+": ada's last minute", got.Members[ada].LastMinute,
			live.Counts{Requests: 5, Throttled: 1, OverBudget: 1, Refused: 1, Tokens: 400, SpendMicros: 4000})
		wantCounts(t, name+": bob's last minute", got.Members[bob].LastMinute,
			live.Counts{Requests: 3, Throttled: 1, Tokens: 4, SpendMicros: 10, Waited: 2, WaitMillis: 3140})
		wantCounts(t, name+": team's last minute", got.LastMinute,
			live.Counts{Requests: 8, Throttled: 2, OverBudget: 1, Refused: 1, Tokens: 404, SpendMicros: 4010, Waited: 2, WaitMillis: 3140})
		if len(got.Hour) != 60 || !got.Hour[59].Start.Equal(t0.Truncate(time.Minute)) {
			t.Fatalf("%s: hour has %d minutes ending %v", name, len(got.Hour), got.Hour[len(got.Hour)-1].Start)
		}
		wantCounts(t, name+": the chart's current minute", got.Hour[59].Counts, got.LastMinute)
		if !got.Members[ada].LastSeen.Equal(t0) {
			t.Errorf("%s: ada last seen %v, want %v", name, got.Members[ada].LastSeen, t0)
		}
	}

	// A flush adds; a second flush with nothing new changes nothing.
	request(a, ada, 200, 1000, 10)
	flush(t, a, a, b)
	if got := read(t, b).Members[ada].LastMinute; got.Requests != 6 || got.SpendMicros != 5000 {
		t.Errorf("after another request: %+v, want 6 requests and 5000 µ$", got)
	}

	// 50 seconds on, the first slot is still in "the last minute"; a minute
	// later it is not, but it stays in the hour's chart.
	c.set(t0.Add(50 * time.Second))
	if got := read(t, b).Members[ada].LastMinute.Requests; got != 6 {
		t.Errorf("50s later ada's last minute has %d requests, want 6", got)
	}
	c.set(t0.Add(60 * time.Second))
	got := read(t, b)
	if got.Members[ada].LastMinute.Requests != 0 || got.Hour[58].Requests != 9 || got.Hour[59].Requests != 0 {
		t.Errorf("a minute later: last minute %d requests, chart %d then %d; want 0, 9, 0",
			got.Members[ada].LastMinute.Requests, got.Hour[58].Requests, got.Hour[59].Requests)
	}
	// An older replica flush never moves last-seen back.
	c.set(t0.Add(-time.Hour))
	refused(b, ada, 429, "rate")
	flush(t, b)
	c.set(t0.Add(60 * time.Second))
	if seen := read(t, a).Members[ada].LastSeen; !seen.Equal(t0) {
		t.Errorf("last seen moved to %v, want %v", seen, t0)
	}
}

func TestInFlightAcrossReplicasAndExpiry(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	rs := replicas(t, 2, c, live.Options{InFlightTTL: 400 * time.Millisecond})
	a, b := rs[0], rs[1]

	a.Started(team, ada)
	a.Started(team, ada)
	b.Started(team, ada)
	b.Started(team, bob)
	flush(t, a, b)
	got := read(t, a)
	if got.Members[ada].InFlight != 3 || got.Members[bob].InFlight != 1 || got.InFlight != 4 {
		t.Fatalf("in flight: ada %d, bob %d, team %d; want 3, 1, 4", got.Members[ada].InFlight, got.Members[bob].InFlight, got.InFlight)
	}

	// Requests that finish are gone after the next flush.
	b.Finished(proxy.Outcome{TeamID: team, MemberID: bob, Admitted: true, Status: 200})
	b.Finished(proxy.Outcome{TeamID: team, MemberID: ada, Admitted: true, Status: 200})
	flush(t, b)
	if got := read(t, a); got.Members[ada].InFlight != 2 || got.Members[bob].InFlight != 0 || got.InFlight != 2 {
		t.Fatalf("after b's requests ended: ada %d, bob %d; want 2, 0", got.Members[ada].InFlight, got.Members[bob].InFlight)
	}

	// Replica a dies (stops flushing): its counts vanish once its key expires;
	// while b keeps flushing, b's stay.
	b.Started(team, bob)
	deadline := time.Now().Add(5 * time.Second)
	for {
		flush(t, b)
		got := read(t, b)
		if got.Members[ada].InFlight == 0 {
			if got.Members[bob].InFlight != 1 {
				t.Errorf("b's own in-flight request: %d, want 1", got.Members[bob].InFlight)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a dead replica's in-flight counts did not expire")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKeysExpire(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	s := live.New(rdb, live.Options{Prefix: prefix, Now: c.now, Replica: "r1"})
	request(s, ada, 200, 1, 1)
	s.Started(team, bob)
	flush(t, s)
	for key, want := range map[string]time.Duration{
		prefix + "{t:7}:live:" + strconv.FormatInt(t0.Unix()/60, 10): 2 * time.Hour,
		prefix + "{t:7}:live:seen":                                   35 * 24 * time.Hour,
		prefix + "{t:7}:live:inflight:r1":                            5 * time.Second,
		prefix + "{t:7}:live:replicas":                               time.Hour,
	} {
		ttl, err := rdb.PTTL(t.Context(), key).Result()
		if err != nil || ttl <= 0 || ttl > want || ttl < want*9/10 {
			t.Errorf("%s: TTL %v (%v), want about %v", key, ttl, err, want)
		}
	}
}

// countingHook counts what a client sends: pipelines and single commands,
// leaving out the handshake of a new connection (HELLO, CLIENT SETINFO).
type countingHook struct{ pipelines, commands atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			h.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			h.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestOnePipelinePerFlushNeverPerRequest(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	hook := &countingHook{}
	rdb.AddHook(hook)
	s := live.New(rdb, live.Options{Prefix: redistest.Prefix(t), Now: newClock(t0).now})
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() { request(s, int64(i%5+1), 200, 1, 1) })
	}
	wg.Wait()
	if hook.pipelines.Load() != 0 || hook.commands.Load() != 0 {
		t.Fatalf("requests reached Redis: %d pipelines, %d commands", hook.pipelines.Load(), hook.commands.Load())
	}
	flush(t, s)
	if hook.pipelines.Load() != 1 || hook.commands.Load() != 0 {
		t.Errorf("one flush sent %d pipelines and %d single commands, want 1 and 0", hook.pipelines.Load(), hook.commands.Load())
	}
	if got := read(t, s).LastMinute.Requests; got != 200 {
		t.Errorf("requests = %d, want 200", got)
	}
}

// TestFlushKeepsCountsWhileRedisIsDown: a failed flush loses nothing.
func TestFlushKeepsCountsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	s := live.New(rdb, live.Options{Prefix: "t:", Now: newClock(t0).now})
	request(s, ada, 200, 5, 5)
	srv.Kill()
	if err := s.Flush(t.Context()); err == nil {
		t.Fatal("flush to a dead Redis succeeded")
	}
	request(s, ada, 200, 5, 5)
	srv.Start()
	flush(t, s)
	if got := read(t, s).Members[ada].LastMinute; got.Requests != 2 || got.SpendMicros != 10 {
		t.Errorf("after Redis came back: %+v, want 2 requests, 10 µ$", got)
	}
}

func TestInProcess(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	s := live.New(nil, live.Options{Now: c.now})
	request(s, ada, 200, 1500, 100)
	refused(s, ada, 429, "rate")
	s.Started(team, bob)
	// No flush needed: the one process is the whole picture.
	got := read(t, s)
	wantCounts(t, "ada", got.Members[ada].LastMinute, live.Counts{Requests: 2, Throttled: 1, Tokens: 100, SpendMicros: 1500})
	if got.Members[bob].InFlight != 1 || got.InFlight != 1 || !got.Members[ada].LastSeen.Equal(t0) {
		t.Errorf("bob in flight %d, team %d, ada seen %v", got.Members[bob].InFlight, got.InFlight, got.Members[ada].LastSeen)
	}
	if got.Hour[59].Requests != 2 || got.Hour[59].Throttled != 1 {
		t.Errorf("chart's current minute: %+v", got.Hour[59].Counts)
	}
	if other, _ := s.Team(t.Context(), team+1); len(other.Members) != 0 {
		t.Errorf("another team sees %v", other.Members)
	}
	// Three hours on, old minutes are pruned as new traffic arrives.
	c.set(t0.Add(3 * time.Hour))
	request(s, ada, 200, 1, 1)
	c.set(t0)
	if got := read(t, s); got.Hour[59].Requests != 0 {
		t.Errorf("pruned minute still counted: %+v", got.Hour[59].Counts)
	}
}

func TestRunFlushesAndStops(t *testing.T) {
	t.Parallel()
	rs := replicas(t, 2, newClock(time.Now()), live.Options{Interval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rs[0].Run(ctx); close(done) }()
	request(rs[0], ada, 200, 1, 1)
	deadline := time.Now().Add(5 * time.Second)
	for read(t, rs[1]).Members[ada].LastMinute.Requests != 1 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not flush")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The final flush on stop carries what arrived since the last tick.
	request(rs[0], ada, 200, 1, 1)
	cancel()
	<-done
	if got := read(t, rs[1]).Members[ada].LastMinute.Requests; got != 2 {
		t.Errorf("after Run stopped: %d requests, want 2", got)
	}
}

// TestRefusalsReachEveryReplica: a member's refusals, which the ledger never
// sees, are kept newest first on every replica, at most KeptRefusals of them,
// and with their model and hold; forwarded requests are not among them.
func TestRefusalsReachEveryReplica(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	rs := replicas(t, 2, c, live.Options{})
	gateway, console := rs[0], rs[1]
	request(gateway, ada, 200, 10, 10)
	gateway.Finished(proxy.Outcome{TeamID: team, MemberID: ada, Status: 402, Refusal: "budget", Model: "m", HeldMicros: 250_000,
		BudgetRemaining: 1000})
	if err := gateway.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range live.KeptRefusals + 4 {
		c.set(t0.Add(time.Duration(i+1) * time.Second))
		refused(gateway, ada, 429, "rate")
	}
	refused(gateway, bob, 403, "cut_off")
	if err := gateway.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := console.Refusals(t.Context(), team, ada)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != live.KeptRefusals || got[0].Code != "rate" || !got[0].At.Equal(t0.Add(time.Duration(live.KeptRefusals+4)*time.Second)) ||
		!got[0].At.After(got[len(got)-1].At) {
		t.Fatalf("ada's refusals: %d, newest %+v; want %d, newest first", len(got), got[0], live.KeptRefusals)
	}
	// The 402, pushed first, fell off the end of the list.
	bobs, err := console.Refusals(t.Context(), team, bob)
	if err != nil || len(bobs) != 1 || bobs[0].Status != 403 || bobs[0].Code != "cut_off" {
		t.Errorf("bob's refusals: %+v, %v", bobs, err)
	}

	local := live.New(nil, live.Options{Now: c.now})
	local.Finished(proxy.Outcome{TeamID: team, MemberID: ada, Status: 402, Refusal: "budget", Model: "m", HeldMicros: 250_000,
		BudgetRemaining: 1000})
	request(local, ada, 200, 10, 10)
	if got, _ := local.Refusals(t.Context(), team, ada); len(got) != 1 || got[0].Model != "m" || got[0].HoldMicros != 250_000 ||
		got[0].BudgetRemaining != 1000 {
		t.Errorf("in-process refusals: %+v", got)
	}
}
