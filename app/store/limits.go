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

// Limits are a member's or a team's request limits. A zero RateLimit or
// Concurrency means none of that kind.
type Limits struct {
	RateAlgorithm string        `json:"rate_algorithm"`
	RateLimit     int64         `json:"rate_limit"`  // requests per RatePeriod
	RatePeriod    time.Duration `json:"rate_period"` // whole milliseconds
	RateBurst     int64         `json:"rate_burst"`  // token bucket capacity; 0 = RateLimit
	Concurrency   int64         `json:"concurrency"` // requests in flight
}

// Policy is l as the limiter enforces it, checked: a limit whose integer math
// could overflow inside the admission script is refused here, when it is set.
func (l Limits) Policy() (limiter.Policy, error) {
	p := limiter.Policy{Concurrency: l.Concurrency}
	if l.RateLimit > 0 {
		p.Rate = &limiter.Rate{Algorithm: limiter.Algorithm(l.RateAlgorithm), Limit: l.RateLimit, Period: l.RatePeriod, Burst: l.RateBurst}
	}
	if l.RatePeriod%time.Millisecond != 0 || l.RatePeriod <= 0 {
		return p, invalid("period", "rate period must be a positive whole number of milliseconds, not %s", l.RatePeriod)
	}
	if err := p.Validate(); err != nil {
		return p, invalid("limits", "%v", err)
	}
	return p, nil
}

func limitsFrom(algorithm string, rate *int64, periodMS int64, burst, concurrency *int64) Limits {
	return Limits{RateAlgorithm: algorithm, RateLimit: deref(rate), RatePeriod: time.Duration(periodMS) * time.Millisecond,
		RateBurst: deref(burst), Concurrency: deref(concurrency)}
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

// MemberLimits returns a member's limits (none set: no limits).
func (s *Store) MemberLimits(ctx context.Context, teamID, memberID int64) (Limits, error) {
	row, err := s.q.MemberLimitGet(ctx, s.pool, db.MemberLimitGetParams{TeamID: teamID, MemberID: memberID})
	if err != nil {
		if err = mapErr(err); errors.Is(err, ErrNotFound) {
			return Limits{RateAlgorithm: string(limiter.AlgorithmTokenBucket), RatePeriod: time.Second}, nil
		}
		return Limits{}, fmt.Errorf("store: member %d limits: %w", memberID, err)
	}
	return limitsFrom(row.RateAlgorithm, row.RateLimit, row.RatePeriodMs, row.RateBurst, row.Concurrency), nil
}

// SetMemberLimits replaces a member's request limits; every replica applies them
// from its next snapshot reload (milliseconds, by NOTIFY).
func (s *Store) SetMemberLimits(ctx context.Context, actor Actor, teamID, memberID int64, l Limits) (Limits, error) {
	if _, err := l.Policy(); err != nil {
		return Limits{}, err
	}
	before, err := s.MemberLimits(ctx, teamID, memberID)
	if err != nil {
		return Limits{}, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		m, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		if _, err := s.q.MemberLimitUpsert(ctx, tx, db.MemberLimitUpsertParams{MemberID: memberID, TeamID: teamID,
			RateAlgorithm: l.RateAlgorithm, RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(),
			RateBurst: orNull(l.RateBurst), Concurrency: orNull(l.Concurrency)}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: "member.limits", target: m.Email, before: before, after: l})
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
	return limitsFrom(t.RateAlgorithm, t.RateLimit, t.RatePeriodMs, t.RateBurst, t.Concurrency), nil
}

// SetTeamLimits replaces the team-wide limits, which bind on top of each member's.
func (s *Store) SetTeamLimits(ctx context.Context, actor Actor, teamID int64, l Limits) (Limits, error) {
	if _, err := l.Policy(); err != nil {
		return Limits{}, err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.TeamGetByID(ctx, tx, teamID)
		if err != nil {
			return mapErr(err)
		}
		if _, err := s.q.TeamSetLimits(ctx, tx, db.TeamSetLimitsParams{ID: teamID, RateAlgorithm: l.RateAlgorithm,
			RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(), RateBurst: orNull(l.RateBurst),
			Concurrency: orNull(l.Concurrency)}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: "team.limits", target: before.Name,
			before: limitsFrom(before.RateAlgorithm, before.RateLimit, before.RatePeriodMs, before.RateBurst, before.Concurrency), after: l})
	})
	if err != nil {
		return Limits{}, fmt.Errorf("store: set team %d limits: %w", teamID, err)
	}
	return l, nil
}
