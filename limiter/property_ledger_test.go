package limiter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// Pools the ledger property test draws from: budgets of every period (0 included),
// TPM limits, and rate and concurrency limits that interleave with them.
var (
	memberBudgets = []*limiter.Budget{nil, budget(0, limiter.PeriodTotal), budget(20_000, limiter.PeriodTotal),
		budget(9_000, limiter.PeriodDaily), budget(30_000, limiter.PeriodDaily), budget(25_000, limiter.PeriodMonthly)}
	teamBudgets = []*limiter.Budget{nil, budget(50_000, limiter.PeriodTotal), budget(40_000, limiter.PeriodDaily),
		budget(60_000, limiter.PeriodMonthly)}
	ledgerRates = []*limiter.Rate{nil, nil, tokenBucket(5, time.Second, 0), slidingWindow(4, time.Second)}
	holds       = []int64{0, 500, 1000, 2500, 7000, 100_000}
	tokenCounts = []int64{0, 10, 100, 700}
)

// carriedSettle is a settle left for its member's next admission to carry
// (AdmitAfter), as the gateway's settle queue does.
type carriedSettle struct {
	f            *flight
	cost, tokens int64
}

// settlements is cs as each limiter settles them, with its own epochs.
func settlements(team string, cs []carriedSettle) (redis, local []limiter.Settlement) {
	for _, c := range cs {
		s := limiter.Settlement{Team: team, Member: c.f.member, RequestID: c.f.id, Cost: c.cost, Tokens: c.tokens}
		s.Epoch = c.f.epochR
		redis = append(redis, s)
		s.Epoch = c.f.epochL
		local = append(local, s)
	}
	return redis, local
}

// flight is an admitted request the model follows until it settles or expires.
type flight struct {
	member, id     string
	hold, tokens   int64
	epochR, epochL int64 // each limiter's Decision.Epoch
	period         map[limiter.Period]int64
	settledIn      int       // the generation of the team's Redis state the request settled in
	settledAt      time.Time // when
}

// model is the reference the property test checks Redis and Local against: the
// gateway's ledger (what Rebuild is computed from) and the truth (what was really
// spent), per request, attributed to the periods it was admitted in.
type model struct {
	rows   map[string]int64 // request id → ledger amount: the settled cost, or the hold if it expired
	truth  map[string]int64 // request id → real cost (the hold while unknown)
	excess map[string]int64 // request id → real cost above the hold
	lost   map[string]bool  // request id → its hold was in flight at a flush
	who    map[string]*flight
	done   map[string]bool // request id → settle applied once
}

// sums is each request's amount, by member (and "" for the team) and period index,
// for the requests admitted in the current period of p.
func (m *model) sums(amounts map[string]int64, p limiter.Period, now int64) map[string]int64 {
	cur, _ := limiter.PeriodAt(p, now)
	out := map[string]int64{}
	for id, a := range amounts {
		if f := m.who[id]; f.period[p] == cur {
			out[f.member] += a
			out[""] += a
		}
	}
	return out
}

// TestLedgerRedisMatchesLocal runs random schedules of admits with holds and tokens,
// settles (exact, under- and over-estimated, replayed, forged, releases; some
// carried by the member's next admission), lease
// expiries, clock jumps across days and months, and Redis losing the team's state
// followed by a rebuild from the ledger, through Redis and Local on one clock: every
// decision and settle result must be the same. A reference model checks the HOSTILE
// 19 properties on the way: no request settles twice, and no budget is ever passed by
// more than the under-estimates plus the holds that were in flight at a fault.
func TestLedgerRedisMatchesLocal(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	members := []string{"ada", "bob", "cy"}

	for seed := range uint64(ledgerSeeds()) {
		rng := rand.New(rand.NewPCG(seed, 0x1ed9e7))
		clk := newClock()
		clk.Advance(time.Duration(rng.IntN(12)) * time.Hour) // some runs cross midnight (and the month's end) early
		rl := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now})
		ll := limiter.NewLocal(clk.Now)
		team := fmt.Sprintf("ledger-%d", seed)
		policies := map[string]limiter.Policy{}
		for _, mb := range members {
			policies[mb] = limiter.Policy{Rate: ledgerRates[rng.IntN(len(ledgerRates))], Concurrency: rng.Int64N(3),
				Budget: memberBudgets[rng.IntN(len(memberBudgets))], TokensPerMinute: []int64{0, 600, 6000}[rng.IntN(3)]}
		}
		teamPolicy := limiter.Policy{Budget: teamBudgets[rng.IntN(len(teamBudgets))], TokensPerMinute: []int64{0, 0, 20_000}[rng.IntN(3)]}
		lease := []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}[rng.IntN(3)]
		m := &model{rows: map[string]int64{}, truth: map[string]int64{}, excess: map[string]int64{},
			lost: map[string]bool{}, who: map[string]*flight{}, done: map[string]bool{}}
		revoked, cutOff := map[string]bool{}, map[string]bool{}
		var inFlight, settled []*flight
		carry := map[string][]carriedSettle{}
		lostState, generation := false, 0
		// sent records that f's settle went to both limiters.
		sent := func(f *flight) {
			f.settledIn, f.settledAt = generation, clk.Now()
			settled = append(settled, f)
		}

		rebuild := func() {
			now := clk.Now().UnixMicro()
			state := limiter.TeamState{At: clk.Now(), Team: map[limiter.Period]int64{}, Members: map[string]map[limiter.Period]int64{}}
			for _, mb := range members {
				if b := policies[mb].Budget; b != nil {
					state.Members[mb] = map[limiter.Period]int64{b.Period: m.sums(m.rows, b.Period, now)[mb]}
				}
				if revoked["key-"+mb] {
					state.RevokedKeys = append(state.RevokedKeys, "key-"+mb)
				}
				if cutOff[mb] {
					state.CutOff = append(state.CutOff, mb)
				}
			}
			if b := teamPolicy.Budget; b != nil {
				state.Team[b.Period] = m.sums(m.rows, b.Period, now)[""]
			}
			for _, l := range []limiter.Limiter{rl, ll} {
				if err := l.Rebuild(ctx, team, state); err != nil {
					t.Fatal(err)
				}
			}
			lostState = false
		}
		rebuild()

		for op := range 300 {
			where := fmt.Sprintf("seed %d op %d", seed, op)
			switch p := rng.IntN(100); {
			case p < 45:
			case p < 85:
				clk.Advance(time.Duration(rng.IntN(100_000)) * time.Microsecond)
			case p < 97:
				clk.Advance(time.Duration(rng.IntN(3_000_000)) * time.Microsecond)
			default:
				clk.Advance(time.Duration(1+rng.IntN(30)) * time.Hour)
			}
			mb := members[rng.IntN(len(members))]
			switch p := rng.IntN(100); {
			case p < 2:
				on := rng.IntN(4) == 0
				revoked["key-"+mb] = on
				for _, l := range []limiter.Limiter{rl, ll} {
					if err := l.SetKeyRevoked(ctx, team, "key-"+mb, on); err != nil {
						t.Fatal(err)
					}
				}
				continue
			case p < 4:
				on := rng.IntN(4) == 0
				cutOff[mb] = on
				for _, l := range []limiter.Limiter{rl, ll} {
					if err := l.SetMemberCutOff(ctx, team, mb, on); err != nil {
						t.Fatal(err)
					}
				}
				continue
			case p < 6: // Redis loses the team's state
				// The settles the gateway has queued go first (their replica's queue
				// would retry them after the loss, which the replays below cover).
				for mb, cs := range carry {
					for _, c := range cs {
						compareSettle(t, where, rl, ll, team, c.f, c.cost, c.tokens)
						sent(c.f)
					}
					delete(carry, mb)
				}
				flush(t, client, prefix, team)
				ll.Forget(team)
				for _, f := range inFlight {
					m.lost[f.id] = true
				}
				revoked, cutOff = map[string]bool{}, map[string]bool{}
				generation++
				// A new instance: the old one's over-limit cache is per replica.
				rl = limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now})
				lostState = true
				if rng.IntN(2) == 0 {
					rebuild()
				}
				continue
			case p < 12 && lostState:
				rebuild()
				continue
			case p < 14:
				clk.Advance(lease + time.Duration(rng.IntN(2))*time.Microsecond)
				continue
			case p < 40 && len(inFlight) > 0:
				i := rng.IntN(len(inFlight))
				f := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				cost, tokens := f.hold*rng.Int64N(21)/10, f.tokens*rng.Int64N(21)/10 // 0× to 2× the estimate
				if rng.IntN(8) == 0 {
					cost, tokens = 0, 0 // a release
				}
				if _, expired := m.rows[f.id]; !expired {
					m.rows[f.id] = cost
				}
				m.truth[f.id], m.excess[f.id] = cost, max(0, cost-f.hold)
				if len(carry[f.member]) < 4 && rng.IntN(3) == 0 {
					carry[f.member] = append(carry[f.member], carriedSettle{f, cost, tokens})
					continue
				}
				applied := compareSettle(t, where, rl, ll, team, f, cost, tokens).Applied
				if applied && m.done[f.id] {
					t.Fatalf("%s: %s settled twice", where, f.id)
				}
				m.done[f.id] = m.done[f.id] || applied
				sent(f)
				continue
			case p < 48 && len(settled) > 0: // a replay, or a forged id under another member
				f := *settled[rng.IntN(len(settled))]
				if rng.IntN(3) == 0 {
					f.member = members[rng.IntN(len(members))]
				}
				// Only a replay that spans a loss of Redis, or comes after SettledWindow
				// once the team was rebuilt, may be charged again (Lost): an over-count.
				late := clk.Now().Sub(f.settledAt) >= limiter.SettledWindow
				if r := compareSettle(t, where, rl, ll, team, &f, f.hold, f.tokens); r.Applied && !(r.Lost && (f.settledIn < generation || late)) {
					t.Fatalf("%s: a replayed or forged settle of %s applied: %+v", where, f.id, r)
				}
				continue
			}

			req := limiter.Request{Team: team, Member: mb, KeyID: "key-" + mb, RequestID: rid(), Lease: lease,
				MemberPolicy: policies[mb], TeamPolicy: teamPolicy, Meta: "meta-" + mb,
				Hold: holds[rng.IntN(len(holds))], Tokens: tokenCounts[rng.IntN(len(tokenCounts))]}
			if rng.IntN(3) == 0 { // an agent's request that may be lowered to fit
				req.FitFloor = req.Hold / int64(1+rng.IntN(8))
			}
			ssR, ssL := settlements(team, carry[mb])
			for _, c := range carry[mb] {
				sent(c.f)
			}
			delete(carry, mb)
			cached := rl.Stats().CachedRefusals
			got, errs, err := rl.AdmitAfter(ctx, ssR, req)
			if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
				t.Fatalf("%s: redis admit after %d settles: %v %v", where, len(ssR), err, errs)
			}
			if rl.Stats().CachedRefusals != cached { // from the over-limit cache: no sweep either side
				if got.Allowed || got.Reason != limiter.ReasonRate {
					t.Fatalf("%s: cached %+v", where, got)
				}
				for _, s := range ssL {
					settle(t, ll, s)
				}
				continue
			}
			want, errs, err := ll.AdmitAfter(ctx, ssL, req)
			if err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
				t.Fatalf("%s: local admit after %d settles: %v %v", where, len(ssL), err, errs)
			}
			if !sameDecision(got, want) {
				t.Fatalf("%s member %s req %+v:\nredis %+v\nlocal %+v", where, mb, req, got, want)
			}
			for _, e := range got.Expired {
				f := m.who[e.RequestID]
				if f == nil || e.Hold != f.hold || e.Tokens != f.tokens || e.Meta != "meta-"+f.member {
					t.Fatalf("%s: unexpected expired hold %+v", where, e)
				}
				m.rows[e.RequestID], m.truth[e.RequestID] = e.Hold, e.Hold
				inFlight = remove(inFlight, e.RequestID)
			}
			if got.Allowed {
				hold := req.Hold
				if got.Fitted > 0 {
					if got.Fitted < req.FitFloor || got.Fitted >= req.Hold {
						t.Fatalf("%s: fitted %d outside [floor %d, hold %d)", where, got.Fitted, req.FitFloor, req.Hold)
					}
					hold = got.Fitted
				}
				f := &flight{member: mb, id: req.RequestID, hold: hold, tokens: req.Tokens, epochR: got.Epoch,
					epochL: want.Epoch, period: map[limiter.Period]int64{}}
				for _, p := range []limiter.Period{limiter.PeriodTotal, limiter.PeriodDaily, limiter.PeriodMonthly} {
					f.period[p], _ = limiter.PeriodAt(p, clk.Now().UnixMicro())
				}
				inFlight = append(inFlight, f)
				m.who[f.id], m.truth[f.id] = f, f.hold
			}
			m.checkBound(t, where, clk.Now().UnixMicro(), policies, teamPolicy)
		}
	}
}

// checkBound is the HOSTILE 19 property: in every budget's current period, what was
// really spent (in-flight holds at their hold) stays within the limit plus the
// under-estimates plus the holds that were in flight when Redis lost its state.
func (m *model) checkBound(t *testing.T, where string, now int64, policies map[string]limiter.Policy, team limiter.Policy) {
	t.Helper()
	check := func(whose string, b *limiter.Budget) {
		if b == nil {
			return
		}
		truth, excess := m.sums(m.truth, b.Period, now)[whose], m.sums(m.excess, b.Period, now)[whose]
		lost := map[string]int64{}
		for id := range m.lost {
			lost[id] = m.who[id].hold
		}
		faults := m.sums(lost, b.Period, now)[whose]
		if truth > b.Limit+excess+faults {
			t.Fatalf("%s: %q spent %d against a %s budget of %d (under-estimates %d, lost holds %d)",
				where, whose, truth, b.Period, b.Limit, excess, faults)
		}
	}
	for mb, p := range policies {
		check(mb, p.Budget)
	}
	check("", team.Budget)
}

// compareSettle settles f through both limiters and requires the same result.
func compareSettle(t *testing.T, where string, rl, ll limiter.Limiter, team string, f *flight, cost, tokens int64) limiter.SettleResult {
	t.Helper()
	got := settle(t, rl, limiter.Settlement{Team: team, Member: f.member, RequestID: f.id, Cost: cost, Tokens: tokens, Epoch: f.epochR})
	want := settle(t, ll, limiter.Settlement{Team: team, Member: f.member, RequestID: f.id, Cost: cost, Tokens: tokens, Epoch: f.epochL})
	if got != want {
		t.Fatalf("%s: settle %s cost %d tokens %d:\nredis %+v\nlocal %+v", where, f.id, cost, tokens, got, want)
	}
	return got
}

func remove(fs []*flight, id string) []*flight {
	for i, f := range fs {
		if f.id == id {
			return append(fs[:i], fs[i+1:]...)
		}
	}
	return fs
}

// flush deletes every key of team under prefix: what a Redis restart does to it,
// without touching the shared Redis's other keys.
func flush(t *testing.T, c *redis.Client, prefix, team string) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"{t:"+team+"}:*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := c.Unlink(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// ledgerSeeds is how many schedules TestLedgerRedisMatchesLocal runs: 30, or
// LIMITER_SEEDS for a longer search.
func ledgerSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("LIMITER_SEEDS")); err == nil {
		return n
	}
	return 30
}
