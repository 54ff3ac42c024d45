package limiter_test

import (
	"context"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// snapshot is every key under prefix: its DUMP and its PTTL.
type snapshot map[string]struct {
	value string
	ttl   time.Duration
}

func takeSnapshot(t *testing.T, c *redis.Client, prefix string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{}
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		s[k] = struct {
			value string
			ttl   time.Duration
		}{v, ttl}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRefusalChangesNothing refuses requests for each reason, including ones where
// the member's own limits pass and only the team refuses, and requires every key to
// be byte-for-byte what it was, with no TTL extended: no token, slot, hold or spend
// is taken by a refused request.
func TestRefusalChangesNothing(t *testing.T) {
	t.Parallel()
	hour := time.Hour
	tests := []struct {
		name         string
		want         limiter.Reason
		setup        func(ctx context.Context, l limiter.Limiter) error
		member       limiter.Policy
		team         limiter.Policy
		hold, tokens int64
		noRebuild    bool
	}{
		{name: "MemberTokenBucket", want: limiter.ReasonRate,
			member: limiter.Policy{Rate: tokenBucket(2, hour, 0), Concurrency: 5},
			team:   limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 10}},
		{name: "MemberSlidingWindow", want: limiter.ReasonRate,
			member: limiter.Policy{Rate: slidingWindow(2, hour), Concurrency: 5},
			team:   limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 10}},
		{name: "TeamRate", want: limiter.ReasonRate,
			member: limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 5},
			team:   limiter.Policy{Rate: tokenBucket(2, hour, 0)}},
		{name: "TeamConcurrency", want: limiter.ReasonConcurrency,
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 5},
			team:   limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 2}},
		{name: "Revoked", want: limiter.ReasonRevoked,
			setup: func(ctx context.Context, l limiter.Limiter) error {
				return l.SetKeyRevoked(ctx, "team", "key-ada", true)
			},
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 5},
			team:   limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 10}},
		{name: "MemberBudget", want: limiter.ReasonBudget, hold: dollar,
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 50, Budget: budget(3*dollar, limiter.PeriodDaily), TokensPerMinute: 1000},
			team:   limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 100, Budget: budget(100*dollar, limiter.PeriodTotal)}},
		{name: "TeamBudget", want: limiter.ReasonBudget, hold: dollar,
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 50, Budget: budget(30*dollar, limiter.PeriodDaily)},
			team:   limiter.Policy{Budget: budget(3*dollar, limiter.PeriodMonthly), TokensPerMinute: 1000}},
		{name: "MemberTPM", want: limiter.ReasonTPM, hold: dollar, tokens: 300,
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 50, Budget: budget(30*dollar, limiter.PeriodDaily), TokensPerMinute: 1000},
			team:   limiter.Policy{Budget: budget(100*dollar, limiter.PeriodMonthly), TokensPerMinute: 100_000}},
		{name: "Rebuild", want: limiter.ReasonRebuild, hold: dollar, noRebuild: true,
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 50, Budget: budget(30*dollar, limiter.PeriodDaily)}},
		{name: "CutOff", want: limiter.ReasonCutOff,
			setup: func(ctx context.Context, l limiter.Limiter) error {
				return l.SetMemberCutOff(ctx, "team", "ada", true)
			},
			member: limiter.Policy{Rate: tokenBucket(100, hour, 0), Concurrency: 5},
			team:   limiter.Policy{Rate: slidingWindow(100, hour), Concurrency: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client := redistest.Client(t)
			prefix := redistest.Prefix(t)
			clk := newClock()
			opts := limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now}
			l := limiter.NewRedis(client, opts)
			if !tt.noRebuild {
				rebuildEmpty(t, l, "team", clk.Now)
			}
			// Bob fills the team's limits as far as they go, then ada tries.
			bob := limiter.Request{Team: "team", Member: "bob", KeyID: "key-bob", Lease: hour, TeamPolicy: tt.team,
				MemberPolicy: limiter.Policy{Rate: tokenBucket(2, hour, 0), Concurrency: 5}, Hold: tt.hold, Tokens: tt.tokens}
			for range 2 {
				admit(t, l, bob)
			}
			ada := limiter.Request{Team: "team", Member: "ada", KeyID: "key-ada", Lease: hour,
				MemberPolicy: tt.member, TeamPolicy: tt.team, Hold: tt.hold, Tokens: tt.tokens}
			for admit(t, l, ada).Allowed {
			}
			if tt.setup != nil {
				if err := tt.setup(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			before := takeSnapshot(t, client, prefix)
			for range 10 {
				clk.Advance(time.Millisecond)
				// A fresh instance each time, so the over-limit cache cannot answer.
				d := admit(t, limiter.NewRedis(client, opts), ada)
				if d.Allowed || d.Reason != tt.want {
					t.Fatalf("got %+v, want a refusal for %s", d, tt.want)
				}
			}
			after := takeSnapshot(t, client, prefix)
			if !maps.EqualFunc(before, after, func(a, b struct {
				value string
				ttl   time.Duration
			}) bool {
				return a.value == b.value && b.ttl <= a.ttl
			}) {
				t.Fatalf("refusals changed Redis:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestRetryAfterIsExact checks the numbers behind the headers against hand-computed
// values, then that a refused request is refused 1µs before its RetryAfter and
// admitted at it, for both algorithms and both scopes.
func TestRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	prefix := redistest.Prefix(t)
	clk := newClock()
	opts := limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout, Now: clk.Now}
	fresh := func() *limiter.Redis { return limiter.NewRedis(client, opts) }

	t.Run("TokenBucketNumbers", func(t *testing.T) {
		req := limiter.Request{Team: "numbers", Member: "tb", MemberPolicy: limiter.Policy{Rate: tokenBucket(3, time.Second, 0)}}
		d := admit(t, fresh(), req)
		want := limiter.Decision{Allowed: true, Scope: limiter.ScopeMember, Limit: 3, Remaining: 2, Reset: 333334 * time.Microsecond,
			BudgetRemaining: -1}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("first admit %+v, want %+v", d, want)
		}
		admit(t, fresh(), req)
		admit(t, fresh(), req)
		d = admit(t, fresh(), req)
		want = limiter.Decision{Reason: limiter.ReasonRate, Scope: limiter.ScopeMember, Limit: 3,
			Reset: time.Second, RetryAfter: 333334 * time.Microsecond, BudgetRemaining: -1}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("fourth admit %+v, want %+v", d, want)
		}
	})
	t.Run("SlidingWindowNumbers", func(t *testing.T) {
		req := limiter.Request{Team: "numbers", Member: "sw", MemberPolicy: limiter.Policy{Rate: slidingWindow(3, time.Second)}}
		for range 3 {
			admit(t, fresh(), req)
			clk.Advance(100 * time.Millisecond)
		}
		d := admit(t, fresh(), req)
		want := limiter.Decision{Reason: limiter.ReasonRate, Scope: limiter.ScopeMember, Limit: 3,
			Reset: 900 * time.Millisecond, RetryAfter: 700 * time.Millisecond, BudgetRemaining: -1}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("fourth admit %+v, want %+v", d, want)
		}
	})

	rates := []*limiter.Rate{tokenBucket(3, time.Second, 0), tokenBucket(2, 700*time.Millisecond, 5),
		slidingWindow(3, time.Second), slidingWindow(4, 300*time.Millisecond)}
	for i, rate := range rates {
		for _, scope := range []limiter.Scope{limiter.ScopeMember, limiter.ScopeTeam} {
			req := limiter.Request{Team: "exact", Member: "m" + string(rune('0'+i))}
			if scope == limiter.ScopeMember {
				req.MemberPolicy.Rate = rate
			} else {
				req.Team += string(rune('0' + i))
				req.TeamPolicy.Rate = rate
			}
			for cycle := range 5 {
				var d limiter.Decision
				for d = admit(t, fresh(), req); d.Allowed; d = admit(t, fresh(), req) {
					clk.Advance(time.Duration(cycle) * 7 * time.Millisecond)
				}
				if d.Reason != limiter.ReasonRate || d.Scope != scope || d.RetryAfter <= 0 {
					t.Fatalf("%+v %s: refusal %+v", rate, scope, d)
				}
				clk.Advance(d.RetryAfter - time.Microsecond)
				if early := admit(t, fresh(), req); early.Allowed || early.RetryAfter != time.Microsecond {
					t.Fatalf("%+v %s: 1µs before RetryAfter %v: %+v, want refused for 1µs more", rate, scope, d.RetryAfter, early)
				}
				clk.Advance(time.Microsecond)
				if d := admit(t, fresh(), req); !d.Allowed {
					t.Fatalf("%+v %s: at RetryAfter: %+v, want admitted", rate, scope, d)
				}
			}
		}
	}
}
