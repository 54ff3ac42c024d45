package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/limiter"
)

// TeamMemberLimits returns the limits that bind each member of a team, as the
// replicas have them after their next reload: their tier's with their own on
// top, the budget raised by this period's grants. A member missing from the
// map has NoLimits.
func (s *Store) TeamMemberLimits(ctx context.Context, teamID int64) (map[int64]Limits, error) {
	out := map[int64]Limits{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		members, err := s.q.MemberList(ctx, tx, teamID)
		if err != nil {
			return err
		}
		limitRows, err := s.q.MemberLimitListByTeam(ctx, tx, teamID)
		if err != nil {
			return err
		}
		tierRows, err := s.q.TierList(ctx, tx, teamID)
		if err != nil {
			return err
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		grantRows, err := s.q.BudgetGrantListSince(ctx, tx, ptr(now.AddDate(0, -1, -1)))
		if err != nil {
			return err
		}
		own := make(map[int64]Limits, len(limitRows))
		for _, r := range limitRows {
			own[r.MemberID] = memberLimitRow(r).limits()
		}
		tiers := make(map[int64]Limits, len(tierRows))
		for _, t := range tierRows {
			tiers[t.ID] = tierFromListRow(t).Limits
		}
		grants := grantSumsOf(grantRows)
		for _, m := range members {
			if _, ok := own[m.ID]; ok || m.TierID != nil {
				out[m.ID] = grants.binding(m.ID, m.TierID, tiers, own, now)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: team %d member limits: %w", teamID, err)
	}
	return out, nil
}

// grantSums is what approved budget requests granted, per member, kind of
// period and period start.
type grantSums map[grantKey]int64

type grantKey struct {
	member int64
	period string
	start  time.Time
}

func grantSumsOf(rows []db.BudgetGrantListSinceRow) grantSums {
	g := make(grantSums, len(rows))
	for _, r := range rows {
		if r.BudgetPeriod != nil && r.PeriodStart != nil {
			g[grantKey{r.MemberID, *r.BudgetPeriod, r.PeriodStart.UTC()}] += r.AmountMicros
		}
	}
	return g
}

// binding is the limits that bind a member at now: their tier's with their own
// on top, the budget raised by what was granted for the period now current
// only (a grant of an earlier period, or of another kind of period than the
// member now has, adds nothing).
func (g grantSums) binding(member int64, tierID *int64, tiers, own map[int64]Limits, now time.Time) Limits {
	o, ok := own[member]
	if !ok {
		o = NoLimits()
	}
	tier := NoLimits()
	if tierID != nil {
		tier = tiers[*tierID]
	}
	l := Resolve(tier, o)
	if l.Budget != nil {
		l.Budget = ptr(*l.Budget + g[grantKey{member, l.BudgetPeriod, PeriodStart(l.BudgetPeriod, now)}])
	}
	return l
}

// PeriodStart is when the budget period containing now began: UTC midnight for
// daily, the first of the UTC month for monthly, the Unix epoch for total. It is
// the since of SpendSince, as the limiter counts the period.
func PeriodStart(period string, now time.Time) time.Time {
	now = now.UTC()
	switch limiter.Period(period) {
	case limiter.PeriodDaily:
		return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	case limiter.PeriodMonthly:
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Unix(0, 0).UTC()
}

// PeriodEnd is when the budget period containing now ends and spend starts
// again from zero; false for a total budget, which never resets.
func PeriodEnd(period string, now time.Time) (time.Time, bool) {
	start := PeriodStart(period, now)
	switch limiter.Period(period) {
	case limiter.PeriodDaily:
		return start.AddDate(0, 0, 1), true
	case limiter.PeriodMonthly:
		return start.AddDate(0, 1, 0), true
	}
	return time.Time{}, false
}
