package limiter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestQueueRedisMatchesLocal runs random schedules through the waiting room of
// the Redis limiter and of the Local twin on one injected clock: arrivals of
// members of different weights under team rate, concurrency and TPM limits (a
// budget and member limits too, which never queue), waiters coming back with
// their tickets early, on time or late, callers leaving, releases and clock
// steps. Every decision must be the same, the queue's figures included.
func TestQueueRedisMatchesLocal(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	teamPolicies := []limiter.Policy{
		{Rate: tokenBucket(5, time.Second, 2)},
		{Rate: slidingWindow(3, 500*time.Millisecond)},
		{Concurrency: 2},
		{TokensPerMinute: 6000},
		{TokensPerMinute: 3000, Budget: budget(1_000_000, limiter.PeriodDaily), Concurrency: 3},
		{Rate: tokenBucket(20, time.Second, 0), TokensPerMinute: 12000},
	}
	var queuedSeen, admittedFromQueue int
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
		clk := newClock()
		rl := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now})
		ll := limiter.NewLocal(clk.Now)
		team := fmt.Sprintf("qteam-%d", seed)
		rebuildEmpty(t, rl, team, clk.Now)
		rebuildEmpty(t, ll, team, clk.Now)
		teamPolicy := teamPolicies[rng.IntN(len(teamPolicies))]
		members := []string{"ada", "bob", "cy", "dee"}
		weights := map[string]int64{}
		policies := map[string]limiter.Policy{}
		for _, m := range members {
			weights[m] = []int64{0, 1, 3, 8, 1000}[rng.IntN(5)]
			if rng.IntN(4) == 0 {
				policies[m] = limiter.Policy{Rate: tokenBucket(4, time.Second, 0)}
			}
		}
		wait := []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}[rng.IntN(3)]
		type waiter struct{ req limiter.Request }
		var waiting []waiter
		var inFlight []limiter.Request
		both := func(f func(l limiter.Limiter) error) { onBoth(t, f, rl, ll) }
		for op := range 300 {
			switch p := rng.IntN(100); {
			case p < 35:
			case p < 85:
				clk.Advance(time.Duration(rng.IntN(60_000)) * time.Microsecond)
			default:
				clk.Advance(time.Duration(rng.IntN(700_000)) * time.Microsecond)
			}
			var req limiter.Request
			switch p := rng.IntN(100); {
			case p < 10 && len(inFlight) > 0:
				i := rng.IntN(len(inFlight))
				r := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				both(func(l limiter.Limiter) error {
					_, err := l.Settle(ctx, limiter.Settlement{Team: team, Member: r.Member, RequestID: r.RequestID,
						Cost: r.Hold, Tokens: r.Tokens / 2})
					return err
				})
				continue
			case p < 15 && len(waiting) > 0:
				i := rng.IntN(len(waiting))
				w := waiting[i]
				waiting = append(waiting[:i], waiting[i+1:]...)
				both(func(l limiter.Limiter) error { return l.Leave(ctx, team, w.req.RequestID) })
				continue
			case p < 60 && len(waiting) > 0:
				i := rng.IntN(len(waiting))
				req = waiting[i].req
				waiting = append(waiting[:i], waiting[i+1:]...)
				req.QueueWait = max(time.Microsecond, req.QueueWait-time.Duration(rng.IntN(100_000))*time.Microsecond)
			default:
				m := members[rng.IntN(len(members))]
				req = limiter.Request{Team: team, Member: m, KeyID: "key-" + m, RequestID: rid(), Lease: time.Minute,
					MemberPolicy: policies[m], TeamPolicy: teamPolicy, Weight: weights[m], QueueWait: wait,
					Tokens: []int64{0, 50, 200, 1500}[rng.IntN(4)], Hold: 100}
			}
			before := trips.n.Load()
			got, err := rl.Admit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			cached := trips.n.Load() == before
			want := admit(t, ll, req)
			where := fmt.Sprintf("seed %d op %d %s (weight %d, queued %v) team %+v", seed, op, req.Member, req.Weight, req.Queued, teamPolicy)
			if cached {
				// A member's rate refusal from the over-limit cache: never queued,
				// and (as TestRedisMatchesLocal allows) another limit may be worse.
				if req.Queued || got.Reason != limiter.ReasonRate || got.Scope != limiter.ScopeMember || want.Allowed ||
					want.Reason == limiter.ReasonQueued {
					t.Fatalf("%s: cached refusal disagrees:\ncached %+v\nlocal  %+v", where, got, want)
				}
			} else if !sameDecision(got, want) {
				t.Fatalf("%s:\nredis %+v\nlocal %+v", where, got, want)
			}
			switch {
			case want.Allowed:
				inFlight = append(inFlight, req)
				if req.Queued {
					admittedFromQueue++
				}
			case want.Reason == limiter.ReasonQueued:
				queuedSeen++
				if want.RetryAfter <= 0 || want.QueueDepth < 1 || want.QueuePosition >= want.QueueDepth {
					t.Fatalf("%s: queued decision out of range: %+v", where, want)
				}
				req.Queued = true
				waiting = append(waiting, waiter{req})
			}
		}
	}
	// The schedules must exercise the room, not just pass through it.
	if queuedSeen < 500 || admittedFromQueue < 100 {
		t.Fatalf("only %d queued decisions and %d admissions from the queue", queuedSeen, admittedFromQueue)
	}
}

// sfqOrder is the reference model: start-time fair queueing with every member
// backlogged from the start, each request of cost 1. Tag k of a member of weight
// w starts at k/w; requests are served by start tag, ties by member name (the
// request ids below sort that way).
func sfqOrder(weights map[string]int64, n int) []string {
	type tag struct {
		num, den int64
		member   string
	}
	var tags []tag
	for m, w := range weights {
		for k := range int64(n) {
			tags = append(tags, tag{k, w, m})
		}
	}
	less := func(a, b tag) bool {
		if a.num*b.den != b.num*a.den {
			return a.num*b.den < b.num*a.den
		}
		return a.member < b.member
	}
	for i := range tags {
		for j := i + 1; j < len(tags); j++ {
			if less(tags[j], tags[i]) {
				tags[i], tags[j] = tags[j], tags[i]
			}
		}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = tags[i].member
	}
	return out
}

// TestQueueServesInFairOrder queues a backlog for members of weights 8, 5 and 1
// behind a team rate limit (one request a second, no burst) on both limiters,
// every waiter coming back every 100 ms: the order they are admitted in is the
// reference model's. The weights divide MaxWeight, so the integer tags are exact.
func TestQueueServesInFairOrder(t *testing.T) {
	t.Parallel()
	weights := map[string]int64{"a": 8, "b": 5, "c": 1}
	const backlog, served = 14, 24
	want := sfqOrder(weights, served)
	for name, mk := range map[string]func(now func() time.Time) limiter.Limiter{
		"Redis": func(now func() time.Time) limiter.Limiter { return newRedis(t, redistest.Prefix(t), now) },
		"Local": func(now func() time.Time) limiter.Limiter { return limiter.NewLocal(now) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			l := mk(clk.Now)
			team := limiter.Policy{Rate: tokenBucket(1, time.Second, 1)}
			// The team's one token goes to a first request, so the backlog queues.
			if d := admit(t, l, limiter.Request{Team: "t", Member: "z", RequestID: rid(), TeamPolicy: team}); !d.Allowed {
				t.Fatalf("first request: %+v", d)
			}
			var waiting []limiter.Request
			for k := range backlog {
				for _, m := range []string{"a", "b", "c"} {
					req := limiter.Request{Team: "t", Member: m, RequestID: fmt.Sprintf("%s-%02d", m, k), TeamPolicy: team,
						Weight: weights[m], QueueWait: time.Hour / 60}
					d := admit(t, l, req)
					if d.Reason != limiter.ReasonQueued {
						t.Fatalf("%s: %+v", req.RequestID, d)
					}
					req.Queued = true
					waiting = append(waiting, req)
				}
			}
			var got []string
			for len(got) < served {
				clk.Advance(100 * time.Millisecond)
				admitted := 0
				for i := 0; i < len(waiting); i++ {
					d := admit(t, l, waiting[i])
					if d.Allowed {
						got = append(got, waiting[i].Member)
						waiting = append(waiting[:i], waiting[i+1:]...)
						i--
						admitted++
					} else if d.Reason != limiter.ReasonQueued {
						t.Fatalf("%s: %+v", waiting[i].RequestID, d)
					}
				}
				if admitted > 1 {
					t.Fatalf("%d admitted in one round, with one token a second", admitted)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("admitted in order\n%v\nwant (SFQ)\n%v", got, want)
			}
		})
	}
}

// queueLimiters are the limiters the waiting room's tests run on: Local, and two
// Redis clients on one prefix standing for two replicas (requests alternate).
var queueLimiters = map[string]func(t *testing.T, now func() time.Time) []limiter.Limiter{
	"Local": func(t *testing.T, now func() time.Time) []limiter.Limiter {
		return []limiter.Limiter{limiter.NewLocal(now)}
	},
	"RedisTwoReplicas": func(t *testing.T, now func() time.Time) []limiter.Limiter {
		p := redistest.Prefix(t)
		return []limiter.Limiter{newRedis(t, p, now), newRedis(t, p, now)}
	},
}

// onQueueLimiters runs f as a parallel subtest on each of queueLimiters, on a
// clock of its own.
func onQueueLimiters(t *testing.T, f func(t *testing.T, clk *clock, ls []limiter.Limiter)) {
	for name, mk := range queueLimiters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			f(t, clk, mk(t, clk.Now))
		})
	}
}

// TestQueueWeightsShareTeamTPM backlogs two members of weights 8 and 1, four
// requests in flight each (a new one as each is admitted), behind a team TPM
// limit they both want all of, for 60 s of the injected clock, every waiter
// coming back every 20 ms through alternating replicas: the tokens admitted
// are within 10% of 8 : 1, and never more than the limit allows.
func TestQueueWeightsShareTeamTPM(t *testing.T) {
	t.Parallel()
	onQueueLimiters(t, func(t *testing.T, clk *clock, ls []limiter.Limiter) {
		const tpm, tokens, seconds = 60_000, 100, 60
		team := limiter.Policy{TokensPerMinute: tpm}
		rebuildEmpty(t, ls[0], "t", clk.Now)
		// Drain the full bucket first, so that contention starts at once.
		if d := admit(t, ls[0], limiter.Request{Team: "t", Member: "z", RequestID: rid(), Tokens: tpm, Lease: time.Hour,
			TeamPolicy: team}); !d.Allowed {
			t.Fatalf("drain: %+v", d)
		}
		weights := map[string]int64{"heavy": 8, "light": 1}
		newReq := func(m string) limiter.Request {
			return limiter.Request{Team: "t", Member: m, RequestID: rid(), Tokens: tokens, Lease: time.Hour,
				TeamPolicy: team, Weight: weights[m], QueueWait: 3 * time.Second}
		}
		var waiting []limiter.Request
		for range 4 {
			waiting = append(waiting, newReq("heavy"), newReq("light"))
		}
		got := map[string]int64{}
		polls := 0
		for clk.Now().Before(epoch.Add(seconds * time.Second)) {
			clk.Advance(20 * time.Millisecond)
			for i := range waiting {
				d := admit(t, ls[polls%len(ls)], waiting[i])
				polls++
				switch {
				case d.Allowed:
					got[waiting[i].Member] += tokens
					waiting[i] = newReq(waiting[i].Member)
				case d.Reason == limiter.ReasonQueued:
					waiting[i].Queued = true
				default:
					t.Fatalf("%s: %+v", waiting[i].Member, d)
				}
			}
		}
		ratio := float64(got["heavy"]) / float64(got["light"])
		t.Logf("admitted tokens %v, ratio %.2f", got, ratio)
		if ratio < 8*0.9 || ratio > 8*1.1 {
			t.Fatalf("admitted tokens %v: ratio %.2f, want 8 ± 10%%", got, ratio)
		}
		if total := got["heavy"] + got["light"]; total > tpm*seconds/60 || total < tpm*seconds/60*9/10 {
			t.Fatalf("admitted %d tokens in %d s under %d a minute", total, seconds, tpm)
		}
	})
}

// TestQueueCallerLeaves: the head of the room leaving (Leave) lets the next
// waiter in at its next visit; a head that neither leaves nor comes back (its
// replica died) holds the room only until its ticket's lease ends.
func TestQueueCallerLeaves(t *testing.T) {
	t.Parallel()
	for _, leaves := range []bool{true, false} {
		for name, mk := range queueLimiters {
			t.Run(fmt.Sprintf("%s/leave=%v", name, leaves), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				ls := mk(t, clk.Now)
				team := limiter.Policy{Concurrency: 1}
				req := func(m string) limiter.Request {
					return limiter.Request{Team: "t", Member: m, RequestID: rid(), Lease: time.Hour, TeamPolicy: team,
						QueueWait: 5 * time.Second}
				}
				busy := req("z")
				if d := admit(t, ls[0], busy); !d.Allowed {
					t.Fatalf("%+v", d)
				}
				gone, next := req("gone"), req("next")
				for _, r := range []*limiter.Request{&gone, &next} {
					if d := admit(t, ls[0], *r); d.Reason != limiter.ReasonQueued {
						t.Fatalf("%s: %+v", r.Member, d)
					}
					r.Queued = true
				}
				if err := release(context.Background(), ls[0], "t", "z", busy.RequestID); err != nil {
					t.Fatal(err)
				}
				clk.Advance(10 * time.Millisecond)
				if d := admit(t, ls[len(ls)-1], next); d.Allowed || d.QueuePosition != 1 || d.QueueDepth != 2 {
					t.Fatalf("behind the head: %+v", d)
				}
				if leaves {
					if err := ls[0].Leave(context.Background(), "t", gone.RequestID); err != nil {
						t.Fatal(err)
					}
				} else {
					// Past the head's lease: its last visit told it to come back
					// within 50 ms, and its ticket lasts 250 ms more.
					clk.Advance(300 * time.Millisecond)
				}
				if d := admit(t, ls[len(ls)-1], next); !d.Allowed {
					t.Fatalf("after the head left: %+v", d)
				}
				if d := admit(t, ls[0], gone); d.Reason != limiter.ReasonQueued || d.QueuePosition != 0 || d.QueueDepth != 1 {
					// It lost its ticket: coming back, it takes a new one.
					t.Fatalf("the head that left, back: %+v", d)
				}
			})
		}
	}
}

// TestQueueWaitIsBounded: a request is let wait only for a wait within its
// budget; at the head, a wait past what is left of it refuses it with the
// team limit's own reason and takes its ticket out of the room.
func TestQueueWaitIsBounded(t *testing.T) {
	t.Parallel()
	onQueueLimiters(t, func(t *testing.T, clk *clock, ls []limiter.Limiter) {
		l := ls[0]
		team := limiter.Policy{Rate: tokenBucket(1, 2*time.Second, 1)}
		req := func(wait time.Duration) limiter.Request {
			return limiter.Request{Team: "t", Member: "ada", RequestID: rid(), TeamPolicy: team, QueueWait: wait}
		}
		if d := admit(t, l, req(time.Second)); !d.Allowed {
			t.Fatalf("%+v", d)
		}
		// The next token is 2 s away: more than a 1 s budget.
		if d := admit(t, l, req(time.Second)); d.Reason != limiter.ReasonRate || d.RetryAfter != 2*time.Second {
			t.Fatalf("past the budget: %+v", d)
		}
		r := req(3 * time.Second)
		if d := admit(t, l, r); d.Reason != limiter.ReasonQueued || d.RetryAfter != 50*time.Millisecond {
			t.Fatalf("within the budget: %+v", d)
		}
		r.Queued = true
		clk.Advance(40 * time.Millisecond)
		r.QueueWait = 500 * time.Millisecond // what is left of it, as the caller counts
		if d := admit(t, l, r); d.Reason != limiter.ReasonRate || d.Scope != limiter.ScopeTeam {
			t.Fatalf("budget run out at the head: %+v", d)
		}
		other := req(3 * time.Second)
		if d := admit(t, l, other); d.Reason != limiter.ReasonQueued || d.QueueDepth != 1 {
			t.Fatalf("the room after it left: %+v", d)
		}
	})
}

// runawayRoom is a team rate limit of runawayRate a second with 50 requests of a
// runaway member always waiting in its room, for runawaySeconds of the injected
// clock in 20 ms ticks, every waiter coming back each tick, the calls taking
// turns over the limiters (replicas).
type runawayRoom struct {
	t       *testing.T
	clk     *clock
	ls      []limiter.Limiter
	team    limiter.Policy
	waiting []limiter.Request
	got     map[string]int
	polls   int
}

const runawayRate, runawaySeconds = 20, 10

func newRunawayRoom(t *testing.T, clk *clock, ls []limiter.Limiter, burst int64) *runawayRoom {
	r := &runawayRoom{t: t, clk: clk, ls: ls, team: limiter.Policy{Rate: tokenBucket(runawayRate, time.Second, burst)},
		got: map[string]int{}}
	for range 50 {
		r.waiting = append(r.waiting, r.request("runaway"))
	}
	return r
}

func (r *runawayRoom) request(member string) limiter.Request {
	return limiter.Request{Team: "t", Member: member, RequestID: rid(), TeamPolicy: r.team, QueueWait: 3 * time.Second}
}

func (r *runawayRoom) admit(req limiter.Request) limiter.Decision {
	d := admit(r.t, r.ls[r.polls%len(r.ls)], req)
	r.polls++
	if d.Allowed {
		r.got[req.Member]++
	}
	return d
}

// tick moves the clock on 20 ms and brings every waiter back, each admitted one
// replaced by a new request of its member's; it reports whether time is left.
func (r *runawayRoom) tick() bool {
	if !r.clk.Now().Before(epoch.Add(runawaySeconds * time.Second)) {
		return false
	}
	r.clk.Advance(20 * time.Millisecond)
	for i, req := range r.waiting {
		switch d := r.admit(req); {
		case d.Allowed:
			r.waiting[i] = r.request(req.Member)
		case d.Reason == limiter.ReasonQueued:
			r.waiting[i].Queued = true
		default:
			r.t.Fatalf("%s: %+v", req.Member, d)
		}
	}
	return true
}

func (r *runawayRoom) total() int {
	n := 0
	for _, c := range r.got {
		n += c
	}
	return n
}

// TestQueueRunawayCannotStarve: a runaway member with 50 requests waiting
// beside four members with one each, all of weight 1, behind a team bucket
// without burst: each normal member gets a fifth of what is admitted within
// 10%, as if the runaway asked like the others. (Coming back on a 20 ms grid to
// a bucket without burst wastes some of the rate; the gateway comes back when
// the limiter says.)
func TestQueueRunawayCannotStarve(t *testing.T) {
	t.Parallel()
	onQueueLimiters(t, func(t *testing.T, clk *clock, ls []limiter.Limiter) {
		r := newRunawayRoom(t, clk, ls, 1)
		normal := []string{"n1", "n2", "n3", "n4"}
		for _, m := range normal {
			r.waiting = append(r.waiting, r.request(m))
		}
		for r.tick() {
		}
		t.Logf("admitted %v", r.got)
		total := r.total()
		if total < runawayRate*runawaySeconds*8/10 {
			t.Fatalf("admitted %v: %d in all, the team limit allows %d", r.got, total, runawayRate*runawaySeconds)
		}
		fair := float64(total) / 5
		for _, m := range normal {
			if n := float64(r.got[m]); n < fair*0.9 || n > fair*1.1 {
				t.Fatalf("admitted %v: %s got %.0f, want %.0f ± 10%%", r.got, m, n, fair)
			}
		}
	})
}

// TestQueueReserveServesShareAtOnce: the runaway behind a team bucket with a
// burst of a second's rate, and four members asking for their share (one
// request each every 250 ms, staggered): the runaway may not take the bucket's
// reserve, so every request of the four is admitted at once, without a ticket,
// and the runaway still gets the rest of the rate.
func TestQueueReserveServesShareAtOnce(t *testing.T) {
	t.Parallel()
	onQueueLimiters(t, func(t *testing.T, clk *clock, ls []limiter.Limiter) {
		r := newRunawayRoom(t, clk, ls, runawayRate)
		normal := []string{"n1", "n2", "n3", "n4"}
		for tick := 1; r.tick(); tick++ {
			// The runaway spent the burst on the first tick; the four start once
			// it is backlogged and its first ticket is served.
			if tick < 50 {
				continue
			}
			// Each of the four asks every 250 ms (12.5 ticks), at its own offset.
			for j, m := range normal {
				if (tick*2+j*6)%25 >= 2 {
					continue
				}
				if d := r.admit(r.request(m)); !d.Allowed {
					t.Fatalf("at %v %s asking for its share: %+v (admitted so far %v)", r.clk.Now().Sub(epoch), m, d, r.got)
				}
			}
		}
		t.Logf("admitted %v", r.got)
		total := r.total()
		if total < runawayRate*runawaySeconds*9/10 || total > runawayRate*(runawaySeconds+1) {
			t.Fatalf("admitted %v: %d in all, the team limit allows %d and a burst of %d", r.got, total,
				runawayRate*runawaySeconds, runawayRate)
		}
		for _, m := range normal {
			if n := r.got[m]; n < 4*(runawaySeconds-1)-1 {
				t.Fatalf("admitted %v: %s got %d", r.got, m, n)
			}
		}
	})
}

// TestQueueRefusesATurnPastTheWait: behind a team rate of 2 a second with its
// burst spent, a member's requests with a 1 s wait take tickets while the
// tickets before them could be served in time (0.5 s, 1 s), and the next is
// refused at once with the wait its turn would take (1.5 s), not after 1 s in the
// room. Another member's first request starts at the virtual time, ahead of the
// runaway's later tickets, so it still gets one.
func TestQueueRefusesATurnPastTheWait(t *testing.T) {
	t.Parallel()
	onQueueLimiters(t, func(t *testing.T, clk *clock, ls []limiter.Limiter) {
		l := ls[0]
		team := limiter.Policy{Rate: tokenBucket(2, time.Second, 1)}
		req := func(m string) limiter.Request {
			return limiter.Request{Team: "t", Member: m, RequestID: rid(), TeamPolicy: team, QueueWait: time.Second}
		}
		if d := admit(t, l, req("runaway")); !d.Allowed {
			t.Fatalf("the burst: %+v", d)
		}
		for i, want := range []int64{1, 2} {
			if d := admit(t, l, req("runaway")); d.Reason != limiter.ReasonQueued || d.QueueDepth != want {
				t.Fatalf("ticket %d: %+v", i+1, d)
			}
		}
		d := admit(t, l, req("runaway"))
		if d.Reason != limiter.ReasonRate || d.Scope != limiter.ScopeTeam || d.RetryAfter != 1500*time.Millisecond {
			t.Fatalf("a turn 1.5 s away with a 1 s wait: %+v", d)
		}
		if d := admit(t, l, req("ada")); d.Reason != limiter.ReasonQueued || d.QueueDepth != 3 || d.QueuePosition != 1 {
			t.Fatalf("another member beside the runaway: %+v", d)
		}
	})
}
