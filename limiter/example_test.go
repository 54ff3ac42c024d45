package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

func ExampleNewLocal() {
	// A fixed clock makes the output exact; production passes nil (time.Now).
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := limiter.NewLocal(func() time.Time { return now })

	req := limiter.Request{
		Team: "acme", Member: "ada", KeyID: "key-1",
		MemberPolicy: limiter.Policy{Rate: &limiter.Rate{
			Algorithm: limiter.AlgorithmTokenBucket, Limit: 2, Period: time.Minute,
		}},
	}
	for i := range 3 {
		req.RequestID = fmt.Sprintf("req-%d", i)
		d, err := l.Admit(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%t reason=%q remaining=%d retry-after=%s\n", d.Allowed, d.Reason, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true reason="" remaining=1 retry-after=0s
	// allowed=true reason="" remaining=0 retry-after=0s
	// allowed=false reason="rate" remaining=0 retry-after=30s
}

func ExampleLocal_Settle() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	l := limiter.NewLocal(func() time.Time { return now })

	// Ada may spend $1.00 a day (amounts are micro-dollars) and 10,000 tokens a minute.
	policy := limiter.Policy{
		Budget:          &limiter.Budget{Limit: 1_000_000, Period: limiter.PeriodDaily},
		TokensPerMinute: 10_000,
	}
	req := limiter.Request{
		Team: "acme", Member: "ada", RequestID: "req-1", Lease: 10 * time.Minute,
		MemberPolicy: policy, Hold: 400_000, Tokens: 4_000, // the estimate
	}
	d, _ := l.Admit(ctx, req)
	fmt.Printf("allowed=%t remaining=%d resets=%s\n", d.Allowed, d.BudgetRemaining, d.BudgetResetsAt.Format(time.DateTime))

	// The provider reported less than the estimate: the difference comes back.
	s := limiter.Settlement{Team: "acme", Member: "ada", RequestID: "req-1", Cost: 150_000, Tokens: 1_500, Epoch: d.Epoch}
	r, _ := l.Settle(ctx, s)
	fmt.Printf("applied=%t\n", r.Applied)
	r, _ = l.Settle(ctx, s) // a replay changes nothing
	fmt.Printf("replay applied=%t\n", r.Applied)

	req.RequestID, req.Hold = "req-2", 900_000
	d, _ = l.Admit(ctx, req)
	fmt.Printf("allowed=%t reason=%q remaining=%d\n", d.Allowed, d.Reason, d.BudgetRemaining)
	// Output:
	// allowed=true remaining=600000 resets=2026-01-02 00:00:00
	// applied=true
	// replay applied=false
	// allowed=false reason="budget" remaining=850000
}
