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

// rates is the pool the property test draws policies from. The last two keep the
// script's scaled integers just below 2^53, the most Policy.Validate allows.
var rates = []*limiter.Rate{
	nil,
	tokenBucket(3, time.Second, 0),
	tokenBucket(2, 100*time.Millisecond, 5),
	tokenBucket(7, 999_999*time.Microsecond, 13),
	tokenBucket(1, 3*time.Second, 1),
	slidingWindow(3, time.Second),
	slidingWindow(5, 250*time.Millisecond),
	slidingWindow(1, 2*time.Second),
	tokenBucket(1_000_003, time.Hour, 2_500_000),
	tokenBucket(3, 24*time.Hour, 104_248),
}

// TestRedisMatchesLocal runs random schedules of admits, releases, revocations and
// cut-offs, with random gaps (zero included), through the Redis limiter and the Local
// twin on one injected clock, and requires the same decision every time.
//
// A refusal served from the Redis limiter's over-limit cache (no round trip) must be a
// rate refusal too; its RetryAfter may be shorter when another limit got tighter
// meanwhile, never longer.
func TestRedisMatchesLocal(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	prefix := redistest.Prefix(t)
	ctx := context.Background()

	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 0x70116a7e))
		clk := newClock()
		rl := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now})
		ll := limiter.NewLocal(clk.Now)
		team := fmt.Sprintf("team-%d", seed)
		members := []string{"ada", "bob", "cy"}
		policies := map[string]limiter.Policy{}
		for _, m := range members {
			policies[m] = limiter.Policy{Rate: rates[rng.IntN(len(rates))], Concurrency: rng.Int64N(4)}
		}
		teamPolicy := limiter.Policy{Rate: rates[rng.IntN(len(rates))], Concurrency: []int64{0, 2, 4}[rng.IntN(3)]}
		lease := []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}[rng.IntN(3)]
		type held struct{ member, id string }
		var inFlight []held
		both := func(f func(l limiter.Limiter) error) { onBoth(t, f, rl, ll) }

		for op := range 250 {
			switch p := rng.IntN(100); {
			case p < 40:
			case p < 80:
				clk.Advance(time.Duration(rng.IntN(100_000)) * time.Microsecond)
			case p < 95:
				clk.Advance(time.Duration(rng.IntN(1_000_000)) * time.Microsecond)
			default:
				clk.Advance(time.Duration(rng.IntN(5_000_000)) * time.Microsecond)
			}
			m := members[rng.IntN(len(members))]
			switch p := rng.IntN(100); {
			case p < 3:
				on := rng.IntN(6) == 0
				both(func(l limiter.Limiter) error { return l.SetKeyRevoked(ctx, team, "key-"+m, on) })
				continue
			case p < 6:
				on := rng.IntN(6) == 0
				both(func(l limiter.Limiter) error { return l.SetMemberCutOff(ctx, team, m, on) })
				continue
			case p < 25 && len(inFlight) > 0:
				i := rng.IntN(len(inFlight))
				h := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				both(func(l limiter.Limiter) error { return release(ctx, l, team, h.member, h.id) })
				continue
			}
			req := limiter.Request{Team: team, Member: m, KeyID: "key-" + m, RequestID: rid(),
				MemberPolicy: policies[m], TeamPolicy: teamPolicy, Lease: lease}
			before := trips.n.Load()
			got := admit(t, rl, req)
			cached := trips.n.Load() == before
			want := admit(t, ll, req)
			if want.Allowed {
				inFlight = append(inFlight, held{m, req.RequestID})
			}
			where := fmt.Sprintf("seed %d op %d member %s policy %+v team %+v", seed, op, m, policies[m], teamPolicy)
			if !cached {
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s:\nredis %+v\nlocal %+v", where, got, want)
				}
				continue
			}
			if got.Allowed || want.Allowed || got.Reason != limiter.ReasonRate || want.Reason != limiter.ReasonRate ||
				got.Remaining != 0 || got.RetryAfter <= 0 || got.RetryAfter > want.RetryAfter {
				t.Fatalf("%s: cached refusal disagrees:\ncached %+v\nlocal  %+v", where, got, want)
			}
		}
	}
}
