package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/limiter"
)

// Limits are a member's or a team's limits. A zero RateLimit, Concurrency or
// TokensPerMinute means none of that kind; a nil Budget means no budget (a
// budget of 0 refuses every paid request).
type Limits struct {
	RateAlgorithm   string        `json:"rate_algorithm"`
	RateLimit       int64         `json:"rate_limit"`  // requests per RatePeriod
	RatePeriod      time.Duration `json:"rate_period"` // whole milliseconds
	RateBurst       int64         `json:"rate_burst"`  // token bucket capacity; 0 = RateLimit
	Concurrency     int64         `json:"concurrency"` // requests in flight
	TokensPerMinute int64         `json:"tokens_per_minute"`
	Budget          *int64        `json:"budget_micros"` // micro-dollars per BudgetPeriod
	BudgetPeriod    string        `json:"budget_period"` // total, daily or monthly (UTC)
}

// NoLimits is what a member without a limits row has.
func NoLimits() Limits {
	return Limits{RateAlgorithm: string(limiter.AlgorithmTokenBucket), RatePeriod: time.Second, BudgetPeriod: string(limiter.PeriodMonthly)}
}

// Policy is l as the limiter enforces it, checked: a limit whose integer math
// could overflow inside the admission script is refused here, when it is set.
func (l Limits) Policy() (limiter.Policy, error) {
	l = l.withDefaults()
	p := limiter.Policy{Concurrency: l.Concurrency, TokensPerMinute: l.TokensPerMinute}
	if l.RateLimit > 0 {
		p.Rate = &limiter.Rate{Algorithm: limiter.Algorithm(l.RateAlgorithm), Limit: l.RateLimit, Period: l.RatePeriod, Burst: l.RateBurst}
	}
	if l.Budget != nil {
		p.Budget = &limiter.Budget{Limit: *l.Budget, Period: limiter.Period(l.BudgetPeriod)}
	}
	if l.RatePeriod%time.Millisecond != 0 || l.RatePeriod <= 0 {
		return p, invalid("period", "rate period must be a positive whole number of milliseconds, not %s", l.RatePeriod)
	}
	switch limiter.Period(l.BudgetPeriod) {
	case limiter.PeriodTotal, limiter.PeriodDaily, limiter.PeriodMonthly:
	default:
		return p, invalid("budget_period", "budget period must be total, daily or monthly, not %q", l.BudgetPeriod)
	}
	if err := p.Validate(); err != nil {
		return p, invalid("limits", "%v", err)
	}
	return p, nil
}

// withDefaults fills what a caller may leave blank: the algorithm and the budget
// period, which the columns require even when no limit of that kind is set.
func (l Limits) withDefaults() Limits {
	if l.RateAlgorithm == "" {
		l.RateAlgorithm = string(limiter.AlgorithmTokenBucket)
	}
	if l.BudgetPeriod == "" {
		l.BudgetPeriod = string(limiter.PeriodMonthly)
	}
	return l
}

type limitRow struct {
	algorithm               string
	rate                    *int64
	periodMS                int64
	burst, concurrency, tpm *int64
	budget                  *int64
	budgetPeriod            string
}

func (r limitRow) limits() Limits {
	return Limits{RateAlgorithm: r.algorithm, RateLimit: deref(r.rate), RatePeriod: time.Duration(r.periodMS) * time.Millisecond,
		RateBurst: deref(r.burst), Concurrency: deref(r.concurrency), TokensPerMinute: deref(r.tpm),
		Budget: r.budget, BudgetPeriod: r.budgetPeriod}
}

func memberLimitRow(m db.MemberLimit) limitRow {
	return limitRow{m.RateAlgorithm, m.RateLimit, m.RatePeriodMs, m.RateBurst, m.Concurrency, m.TokensPerMinute, m.BudgetMicros, m.BudgetPeriod}
}

func teamLimitRow(t db.Team) limitRow {
	return limitRow{t.RateAlgorithm, t.RateLimit, t.RatePeriodMs, t.RateBurst, t.Concurrency, t.TokensPerMinute, t.BudgetMicros, t.BudgetPeriod}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// orNull stores "no limit" as NULL.
func orNull(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// MemberLimits returns a member's limits (none set: NoLimits).
func (s *Store) MemberLimits(ctx context.Context, teamID, memberID int64) (Limits, error) {
	row, err := s.q.MemberLimitGet(ctx, s.pool, db.MemberLimitGetParams{TeamID: teamID, MemberID: memberID})
	if err != nil {
		if err = mapErr(err); errors.Is(err, ErrNotFound) {
			return NoLimits(), nil
		}
		return Limits{}, fmt.Errorf("store: member %d limits: %w", memberID, err)
	}
	return memberLimitRow(row).limits(), nil
}

// SetMemberLimits replaces a member's limits; every replica applies them from its
// next snapshot reload (milliseconds, by NOTIFY).
func (s *Store) SetMemberLimits(ctx context.Context, actor Actor, teamID, memberID int64, l Limits) (Limits, error) {
	return s.ChangeMemberLimits(ctx, actor, teamID, memberID, func(Limits) Limits { return l })
}

// ChangeMemberLimits applies change to a member's limits as they are stored,
// with the member's row locked: two concurrent changes of different limits
// both land instead of the later one writing back what it read before the
// earlier one committed.
func (s *Store) ChangeMemberLimits(ctx context.Context, actor Actor, teamID, memberID int64, change func(Limits) Limits) (Limits, error) {
	var l Limits
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.q.MemberLockByID(ctx, tx, db.MemberLockByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		before := NoLimits()
		switch row, err := s.q.MemberLimitGet(ctx, tx, db.MemberLimitGetParams{TeamID: teamID, MemberID: memberID}); {
		case err == nil:
			before = memberLimitRow(row).limits()
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		l = change(before).withDefaults()
		if _, err := l.Policy(); err != nil {
			return err
		}
		if _, err := s.q.MemberLimitUpsert(ctx, tx, db.MemberLimitUpsertParams{MemberID: memberID, TeamID: teamID,
			RateAlgorithm: l.RateAlgorithm, RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(),
			RateBurst: orNull(l.RateBurst), Concurrency: orNull(l.Concurrency), TokensPerMinute: orNull(l.TokensPerMinute),
			BudgetMicros: l.Budget, BudgetPeriod: l.BudgetPeriod}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberLimits, target: m.Email, before: before, after: l})
	})
	if err != nil {
		return Limits{}, fmt.Errorf("store: set member %d limits: %w", memberID, err)
	}
	return l, nil
}

// TeamLimits returns the team-wide limits.
func (s *Store) TeamLimits(ctx context.Context, teamID int64) (Limits, error) {
	t, err := s.q.TeamGetByID(ctx, s.pool, teamID)
	if err != nil {
		return Limits{}, fmt.Errorf("store: team %d limits: %w", teamID, mapErr(err))
	}
	return teamLimitRow(t).limits(), nil
}

// SetTeamLimits replaces the team-wide limits, which bind on top of each member's.
func (s *Store) SetTeamLimits(ctx context.Context, actor Actor, teamID int64, l Limits) (Limits, error) {
	return s.ChangeTeamLimits(ctx, actor, teamID, func(Limits) Limits { return l })
}

// ChangeTeamLimits is ChangeMemberLimits for the team-wide limits, with the
// team's row locked.
func (s *Store) ChangeTeamLimits(ctx context.Context, actor Actor, teamID int64, change func(Limits) Limits) (Limits, error) {
	var l Limits
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.TeamLock(ctx, tx, teamID)
		if err != nil {
			return mapErr(err)
		}
		l = change(teamLimitRow(before).limits()).withDefaults()
		if _, err := l.Policy(); err != nil {
			return err
		}
		if _, err := s.q.TeamSetLimits(ctx, tx, db.TeamSetLimitsParams{ID: teamID, RateAlgorithm: l.RateAlgorithm,
			RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(), RateBurst: orNull(l.RateBurst),
			Concurrency: orNull(l.Concurrency), TokensPerMinute: orNull(l.TokensPerMinute),
			BudgetMicros: l.Budget, BudgetPeriod: l.BudgetPeriod}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTeamLimits, target: before.Name,
			before: teamLimitRow(before).limits(), after: l})
	})
	if err != nil {
		return Limits{}, fmt.Errorf("store: set team %d limits: %w", teamID, err)
	}
	return l, nil
}
