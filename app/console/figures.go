package console

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/views"
)

// figuresRefresh is how often a stream rereads the Postgres half of its
// figures (members, limits, spend from the ledger); the live half is read every
// push. The ledger itself is written in batches, so spend there is never
// second-exact anyway.
const figuresRefresh = 5 * time.Second

// teamFigures is what the dashboard reads from Postgres about one team.
type teamFigures struct {
	at      time.Time
	members []store.Member
	limits  map[int64]store.Limits // members without a row have NoLimits
	team    store.Limits
	// spend is each member's settled and uncertain ledger spend since the start
	// of each budget period in use, and of the month (shown for members without
	// a budget).
	spend map[string]map[int64]int64
}

func (c *Console) readTeamFigures(ctx context.Context, teamID int64) (teamFigures, error) {
	f := teamFigures{at: time.Now().UTC(), spend: map[string]map[int64]int64{}}
	var err error
	if f.members, err = c.st.Members(ctx, teamID); err != nil {
		return f, err
	}
	if f.limits, err = c.st.TeamMemberLimits(ctx, teamID); err != nil {
		return f, err
	}
	if f.team, err = c.st.TeamLimits(ctx, teamID); err != nil {
		return f, err
	}
	periods := map[string]bool{string(limiter.PeriodMonthly): true, f.team.BudgetPeriod: true}
	for _, l := range f.limits {
		periods[l.BudgetPeriod] = true
	}
	for p := range periods {
		if f.spend[p], err = c.st.SpendSince(ctx, teamID, store.PeriodStart(p, f.at)); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (f teamFigures) memberLimits(id int64) store.Limits {
	if l, ok := f.limits[id]; ok {
		return l
	}
	return store.NoLimits()
}

// memberBudget is a member's spend this period against their budget; without
// a budget, their spend this month.
func (f teamFigures) memberBudget(id int64) views.Budget {
	l := f.memberLimits(id)
	period := l.BudgetPeriod
	if l.Budget == nil {
		period = string(limiter.PeriodMonthly)
	}
	return budgetView(l.Budget, period, f.spend[period][id], f.at)
}

// teamBudget is the team's spend this period against the team budget.
func (f teamFigures) teamBudget() views.Budget {
	period := f.team.BudgetPeriod
	if f.team.Budget == nil {
		period = string(limiter.PeriodMonthly)
	}
	var sum int64
	for _, v := range f.spend[period] {
		sum += v
	}
	return budgetView(f.team.Budget, period, sum, f.at)
}

func budgetView(limit *int64, period string, spent int64, now time.Time) views.Budget {
	b := views.Budget{Spent: dollars(spent), Period: periodLabel(period)}
	if limit == nil {
		return b
	}
	b.Limit, b.Remaining = dollars(*limit), dollars(max(*limit-spent, 0))
	b.Percent, b.Over = views.BudgetBar(spent, *limit)
	if end, ok := store.PeriodEnd(period, now); ok {
		b.Resets = formatTime(end)
	}
	return b
}

func periodLabel(period string) string {
	switch limiter.Period(period) {
	case limiter.PeriodDaily:
		return "today"
	case limiter.PeriodTotal:
		return "in total"
	}
	return "this month"
}

func dollars(micros int64) string { return "$" + store.FormatDollars(micros) }

// readLive is the team's live figures, or ok false when they cannot be read
// (no live counters wired, or Redis not answering).
func (c *Console) readLive(ctx context.Context, teamID int64) (live.Team, bool) {
	if c.live == nil {
		return live.Team{}, false
	}
	t, err := c.live.Team(ctx, teamID)
	if err != nil {
		c.log.Debug("console: live figures", "err", err)
		return live.Team{}, false
	}
	return t, true
}

// count writes a live figure, or "—" when live figures are missing.
func count(n int64, ok bool) string {
	if !ok {
		return "—"
	}
	return strconv.FormatInt(n, 10)
}

// lastSeen says when a member's last request ended, relative while recent.
func lastSeen(t, now time.Time, ok bool) string {
	switch d := now.Sub(t); {
	case !ok:
		return "—"
	case t.IsZero():
		return "never"
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	}
	return formatTime(t)
}

// perPeriod is a rate period in words: "minute", "second", else "5m".
func perPeriod(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	}
	return formatPeriod(d)
}

// describeLimits is limits in words, one line per kind.
func describeLimits(l store.Limits) []views.LimitLine {
	rate := "no limit"
	if l.RateLimit > 0 {
		rate = fmt.Sprintf("%d per %s", l.RateLimit, perPeriod(l.RatePeriod))
		switch {
		case l.RateAlgorithm == string(limiter.AlgorithmSlidingWindow):
			rate += " (sliding window)"
		case l.RateBurst > 0:
			rate += fmt.Sprintf(" (token bucket, bursts of %d)", l.RateBurst)
		default:
			rate += " (token bucket)"
		}
	}
	tpm, conc, budget := "no limit", "no limit", "none"
	if l.TokensPerMinute > 0 {
		tpm = strconv.FormatInt(l.TokensPerMinute, 10)
	}
	if l.Concurrency > 0 {
		conc = strconv.FormatInt(l.Concurrency, 10)
	}
	if l.Budget != nil {
		budget = dollars(*l.Budget) + " " + map[string]string{"daily": "per day", "monthly": "per month", "total": "in total"}[l.BudgetPeriod]
	}
	return []views.LimitLine{{Name: "Requests", Value: rate}, {Name: "Tokens per minute", Value: tpm},
		{Name: "Requests in flight", Value: conc}, {Name: "Budget", Value: budget}}
}
