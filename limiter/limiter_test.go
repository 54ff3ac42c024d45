package limiter_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy limiter.Policy
		want   string // substring of the error; "" = valid
	}{
		{"Empty", limiter.Policy{}, ""},
		{"TokenBucket", limiter.Policy{Rate: tokenBucket(100, time.Minute, 20), Concurrency: 4}, ""},
		{"SlidingWindow", limiter.Policy{Rate: slidingWindow(100, time.Minute)}, ""},
		{"LargestDailyBucket", limiter.Policy{Rate: tokenBucket(3, 24*time.Hour, 104_248)}, ""},
		{"DailyBucketPast2to53", limiter.Policy{Rate: tokenBucket(3, 24*time.Hour, 104_249)}, "2^53"},
		{"HugeBurst", limiter.Policy{Rate: tokenBucket(1, time.Second, math.MaxInt64)}, "2^53"},
		{"HugeLimit", limiter.Policy{Rate: tokenBucket(math.MaxInt64, time.Second, 0)}, "rate limit must be"},
		{"UnknownAlgorithm", limiter.Policy{Rate: &limiter.Rate{Algorithm: "leaky", Limit: 1, Period: time.Second}}, "algorithm"},
		{"ZeroLimit", limiter.Policy{Rate: tokenBucket(0, time.Second, 0)}, "rate limit must be"},
		{"ZeroPeriod", limiter.Policy{Rate: slidingWindow(1, 0)}, "period"},
		{"SubMicrosecondPeriod", limiter.Policy{Rate: slidingWindow(1, 1500*time.Nanosecond)}, "period"},
		{"PeriodOverAYear", limiter.Policy{Rate: slidingWindow(1, 400*24*time.Hour)}, "period"},
		{"BurstOnWindow", limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmSlidingWindow, Limit: 1, Period: time.Second, Burst: 2}}, "burst"},
		{"NegativeBurst", limiter.Policy{Rate: tokenBucket(1, time.Second, -1)}, "burst"},
		{"NegativeConcurrency", limiter.Policy{Concurrency: -1}, "concurrency"},
		{"BudgetAndTPM", limiter.Policy{Budget: budget(10*dollar, limiter.PeriodMonthly), TokensPerMinute: 90_000}, ""},
		{"LargestBudgetAndTPM", limiter.Policy{Budget: budget(1<<51, limiter.PeriodTotal), TokensPerMinute: limiter.MaxTokens}, ""},
		{"BudgetPast2to51", limiter.Policy{Budget: budget(1<<51+1, limiter.PeriodTotal)}, "budget limit"},
		{"NegativeBudget", limiter.Policy{Budget: budget(-1, limiter.PeriodDaily)}, "budget limit"},
		{"UnknownPeriod", limiter.Policy{Budget: budget(1, "weekly")}, "budget period"},
		{"TPMPastTheBound", limiter.Policy{TokensPerMinute: limiter.MaxTokens + 1}, "tokens per minute"},
		{"NegativeTPM", limiter.Policy{TokensPerMinute: -1}, "tokens per minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestAdmitRejectsInvalidRequest(t *testing.T) {
	t.Parallel()
	l := limiter.NewLocal(nil)
	valid := limiter.Request{Team: "t", Member: "m", RequestID: "r", MemberPolicy: limiter.Policy{Concurrency: 1}, Lease: time.Minute}
	tests := map[string]func(*limiter.Request){
		"NoTeam":       func(r *limiter.Request) { r.Team = "" },
		"NoMember":     func(r *limiter.Request) { r.Member = "" },
		"NoRequestID":  func(r *limiter.Request) { r.RequestID = "" },
		"NoLease":      func(r *limiter.Request) { r.Lease = 0 },
		"BadPolicy":    func(r *limiter.Request) { r.TeamPolicy.Rate = tokenBucket(0, time.Second, 0) },
		"NegativeHold": func(r *limiter.Request) { r.Hold = -1 },
		"HugeHold":     func(r *limiter.Request) { r.Hold = 1<<51 + 1 },
		"HugeTokens":   func(r *limiter.Request) { r.Tokens = limiter.MaxTokens + 1 },
		"HugeMeta":     func(r *limiter.Request) { r.Meta = strings.Repeat("x", 1025) },
		"HoldWithoutLease": func(r *limiter.Request) {
			r.MemberPolicy = limiter.Policy{Budget: budget(dollar, limiter.PeriodDaily)}
			r.Hold, r.Lease = 1, 0
		},
	}
	for name, mutate := range tests {
		req := valid
		mutate(&req)
		if d, err := l.Admit(context.Background(), req); err == nil || d.Allowed {
			t.Errorf("%s: Admit = %+v, %v; want an error and no admission", name, d, err)
		}
	}
	if d, err := l.Admit(context.Background(), valid); err != nil || !d.Allowed {
		t.Fatalf("valid request: Admit = %+v, %v", d, err)
	}
}

func TestSettleAndRebuildRejectInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, l := range map[string]limiter.Limiter{"Local": limiter.NewLocal(nil),
		"Redis": limiter.NewRedis(redistest.Client(t), limiter.RedisOptions{Prefix: redistest.Prefix(t)})} {
		valid := limiter.Settlement{Team: "t", Member: "m", RequestID: "r", Cost: 1, Tokens: 1}
		for what, mutate := range map[string]func(*limiter.Settlement){
			"NoTeam": func(s *limiter.Settlement) { s.Team = "" }, "NoRequestID": func(s *limiter.Settlement) { s.RequestID = "" },
			"NegativeCost": func(s *limiter.Settlement) { s.Cost = -1 }, "HugeCost": func(s *limiter.Settlement) { s.Cost = 1<<51 + 1 },
			"NegativeTokens": func(s *limiter.Settlement) { s.Tokens = -1 }, "HugeTokens": func(s *limiter.Settlement) { s.Tokens = limiter.MaxTokens + 1 },
		} {
			s := valid
			mutate(&s)
			if r, err := l.Settle(ctx, s); err == nil || r.Applied {
				t.Errorf("%s %s: %+v, %v; want an error", name, what, r, err)
			}
		}
		bad := []limiter.TeamState{
			{}, // no At
			{At: time.Now(), Team: map[limiter.Period]int64{"weekly": 1}},
			{At: time.Now(), Members: map[string]map[limiter.Period]int64{"m": {limiter.PeriodDaily: -1}}},
		}
		for _, s := range bad {
			if err := l.Rebuild(ctx, "t", s); err == nil {
				t.Errorf("%s: Rebuild(%+v) succeeded, want an error", name, s)
			}
		}
	}
}
