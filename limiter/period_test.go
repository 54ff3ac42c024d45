package limiter_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestPeriodMath checks the integer calendar math against package time, at every
// month boundary from 1970 to 2400 and at random instants.
func TestPeriodMath(t *testing.T) {
	t.Parallel()
	check := func(at time.Time) {
		t.Helper()
		us := at.UnixMicro()
		day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		if i, next := limiter.PeriodAt(limiter.PeriodDaily, us); i != day.Unix()/86400 || next != day.AddDate(0, 0, 1).UnixMicro() {
			t.Fatalf("daily at %s: index %d next %s", at, i, time.UnixMicro(next).UTC())
		}
		month := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		if i, next := limiter.PeriodAt(limiter.PeriodMonthly, us); i != int64(at.Year()*12+int(at.Month())-1) || next != month.AddDate(0, 1, 0).UnixMicro() {
			t.Fatalf("monthly at %s: index %d next %s", at, i, time.UnixMicro(next).UTC())
		}
		if i, next := limiter.PeriodAt(limiter.PeriodTotal, us); i != 0 || next != 0 {
			t.Fatalf("total at %s: %d %d", at, i, next)
		}
	}
	for m := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC); m.Year() < 2400; m = m.AddDate(0, 1, 0) {
		check(m)
		if m.Year() > 1970 || m.Month() > 1 {
			check(m.Add(-time.Microsecond))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(time.UnixMicro(rng.Int64N(time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())).UTC())
	}
}

// TestBudgetPeriodsReset spends a daily and a monthly budget to the limit just before
// a boundary and checks, on Redis (the script's calendar math) and on Local, that it
// is still spent 1µs before the boundary and whole again at it, with no daemon; at
// month ends, leap days, century years and December to January.
func TestBudgetPeriodsReset(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	boundaries := []time.Time{
		time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC), // a leap day begins
		time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC),  // after a leap February
		time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC),  // after a common February
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),  // 2100 is not a leap year
		time.Date(2000, 3, 1, 0, 0, 0, 0, time.UTC),  // 2000 is
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),  // December to January
		time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC),  // a 30-day month ends
		time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), // real-time midnight of the test's epoch
	}
	for _, b := range boundaries {
		for _, period := range []limiter.Period{limiter.PeriodDaily, limiter.PeriodMonthly} {
			if period == limiter.PeriodMonthly && b.Day() != 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", b.Format("2006-01-02"), period), func(t *testing.T) {
				t.Parallel()
				clk := &clock{}
				clk.us.Store(b.Add(-time.Hour).UnixMicro())
				team := fmt.Sprintf("%s-%s", b.Format("20060102"), period)
				ls := map[string]limiter.Limiter{"Redis": newRedis(t, prefix, clk.Now), "Local": limiter.NewLocal(clk.Now)}
				req := func(hold int64) limiter.Request {
					return limiter.Request{Team: team, Member: "ada", RequestID: rid(), Hold: hold, Lease: time.Minute,
						MemberPolicy: limiter.Policy{Budget: budget(dollar, period)}}
				}
				for name, l := range ls {
					rebuildEmpty(t, l, team, clk.Now)
					r := req(dollar)
					d := admit(t, l, r)
					if !d.Allowed || !d.BudgetResetsAt.Equal(b) {
						t.Fatalf("%s: %+v, want admitted with the budget resetting at %s", name, d, b)
					}
					settle(t, l, limiter.Settlement{Team: team, Member: "ada", RequestID: r.RequestID, Cost: dollar, Epoch: d.Epoch})
				}
				clk.us.Store(b.UnixMicro() - 1)
				for name, l := range ls {
					if d := admit(t, l, req(1)); d.Allowed || d.Reason != limiter.ReasonBudget || !d.BudgetResetsAt.Equal(b) {
						t.Fatalf("%s 1µs before %s: %+v, want refused until %s", name, b, d, b)
					}
				}
				clk.us.Store(b.UnixMicro())
				next := b.AddDate(0, 0, 1)
				if period == limiter.PeriodMonthly {
					next = b.AddDate(0, 1, 0)
				}
				for name, l := range ls {
					if d := admit(t, l, req(1)); !d.Allowed || d.BudgetRemaining != dollar-1 || !d.BudgetResetsAt.Equal(next) {
						t.Fatalf("%s at %s: %+v, want a fresh budget until %s", name, b, d, next)
					}
				}
			})
		}
	}
}
