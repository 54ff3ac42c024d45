package store

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

// TeamMemberLimits returns the limits of every member of a team that has any
// set; a member missing from the map has NoLimits.
func (s *Store) TeamMemberLimits(ctx context.Context, teamID int64) (map[int64]Limits, error) {
	rows, err := s.q.MemberLimitListByTeam(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: team %d member limits: %w", teamID, err)
	}
	out := make(map[int64]Limits, len(rows))
	for _, r := range rows {
		out[r.MemberID] = memberLimitRow(r).limits()
	}
	return out, nil
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
