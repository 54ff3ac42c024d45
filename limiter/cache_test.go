package limiter_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestOverLimitCache checks which refusals are answered without Redis, and for how long.
func TestOverLimitCache(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	trips := &roundTrips{}
	client.AddHook(trips)
	clk := newClock()
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: redistest.Prefix(t), Timeout: testTimeout, Now: clk.Now})
	// try admits req and reports whether Redis was asked.
	try := func(req limiter.Request) (limiter.Decision, bool) {
		t.Helper()
		before := trips.n.Load()
		d := admit(t, l, req)
		return d, trips.n.Load() > before
	}
	admit(t, l, limiter.Request{Team: "warm", Member: "up"}) // loads the script

	t.Run("RateRefusalUntilRetryAfter", func(t *testing.T) {
		req := limiter.Request{Team: "t1", Member: "ada", MemberPolicy: limiter.Policy{Rate: tokenBucket(1, time.Minute, 0)}}
		admit(t, l, req)
		first, asked := try(req)
		if first.Allowed || !asked {
			t.Fatalf("%+v asked=%t, want a refusal from Redis", first, asked)
		}
		clk.Advance(20 * time.Second)
		d, asked := try(req)
		want := first
		want.Reset -= 20 * time.Second
		want.RetryAfter -= 20 * time.Second
		if asked || !reflect.DeepEqual(d, want) {
			t.Fatalf("20s later: %+v asked=%t, want %+v from the cache", d, asked, want)
		}
		if n := l.Stats().CachedRefusals; n != 1 {
			t.Fatalf("CachedRefusals = %d, want 1", n)
		}
		// Another policy is another limit: ask Redis.
		other := req
		other.MemberPolicy.Rate = tokenBucket(2, time.Minute, 0)
		if _, asked := try(other); !asked {
			t.Fatal("a changed policy was answered from the cache")
		}
		clk.Advance(first.RetryAfter - 20*time.Second)
		if d, asked := try(req); !d.Allowed || !asked {
			t.Fatalf("at RetryAfter: %+v asked=%t, want admitted by Redis", d, asked)
		}
	})
	t.Run("TeamRefusalIsPerMember", func(t *testing.T) {
		team := limiter.Policy{Rate: tokenBucket(1, time.Minute, 0)}
		ada := limiter.Request{Team: "t2", Member: "ada", TeamPolicy: team}
		bob := limiter.Request{Team: "t2", Member: "bob", TeamPolicy: team}
		admit(t, l, ada)
		try(ada)
		if d, asked := try(ada); d.Allowed || d.Scope != limiter.ScopeTeam || asked {
			t.Fatalf("ada: %+v asked=%t, want a cached team refusal", d, asked)
		}
		if d, asked := try(bob); d.Allowed || !asked {
			t.Fatalf("bob: %+v asked=%t, want a refusal from Redis", d, asked)
		}
	})
	t.Run("ConcurrencyRefusalNotCached", func(t *testing.T) {
		req := limiter.Request{Team: "t3", Member: "ada", Lease: time.Minute, MemberPolicy: limiter.Policy{Concurrency: 1}}
		admit(t, l, req)
		for range 2 {
			if d, asked := try(req); d.Reason != limiter.ReasonConcurrency || !asked {
				t.Fatalf("%+v asked=%t, want a concurrency refusal from Redis", d, asked)
			}
		}
	})
}
