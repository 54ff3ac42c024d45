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
