package store

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// The bounds of each limit, the same for every writer (admin API, console,
// CLI) and for members, teams and tiers: what the admission script's integer
// math holds exactly. A value past one is refused, never clamped or wrapped.
const (
	MaxRateLimit       = limiter.MaxRateLimit   // requests per period (also the largest burst)
	MaxRatePeriod      = limiter.MaxPeriod      // 366 days
	MaxConcurrency     = limiter.MaxConcurrency // requests in flight
	MaxTokensPerMinute = limiter.MaxTokens
	MaxBudget          = limiter.MaxMoney // micro-dollars, about $2.2 billion
)

// RatePeriodMS is a rate period given in whole milliseconds, as the admin API
// takes it, checked before it becomes a Duration: an unchecked count times
// time.Millisecond wraps past 2^63 ns, and 2^58+1 ms became 1 ms.
func RatePeriodMS(ms int64) (time.Duration, error) {
	if ms < 1 || ms > int64(MaxRatePeriod/time.Millisecond) {
		return 0, invalid("rate_period_ms", "rate period must be from 1 to %d milliseconds (366 days), not %d", int64(MaxRatePeriod/time.Millisecond), ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Validate checks l as a writer sets it: each limit within its bound, named as
// the admin API spells it (rate_limit, rate_period_ms, ...), then what spans
// fields. Every store function that writes limits calls it.
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch limiter.Algorithm(l.RateAlgorithm) {
	case limiter.AlgorithmTokenBucket, limiter.AlgorithmSlidingWindow:
	default:
		return invalid("rate_algorithm", "rate algorithm must be token_bucket or sliding_window, not %q", l.RateAlgorithm)
	}
	for _, f := range []struct {
		field, what string
		v, max      int64
	}{
		{"rate_limit", "rate limit", l.RateLimit, MaxRateLimit},
		{"rate_burst", "rate burst", l.RateBurst, MaxRateLimit},
		{"concurrency", "concurrency", l.Concurrency, MaxConcurrency},
		{"tokens_per_minute", "tokens per minute", l.TokensPerMinute, MaxTokensPerMinute},
	} {
		if f.v < 0 || f.v > f.max {
			return invalid(f.field, "%s must be from 0 (none) to %d, not %d", f.what, f.max, f.v)
		}
	}
	// Checked with or without a rate limit: a period is kept for when one is set.
	if l.RatePeriod <= 0 || l.RatePeriod > MaxRatePeriod || l.RatePeriod%time.Millisecond != 0 {
		return invalid("rate_period_ms", "rate period must be a whole number of milliseconds from 1ms to 366 days, not %s", l.RatePeriod)
	}
	if l.Budget != nil && (*l.Budget < 0 || *l.Budget > MaxBudget) {
		return invalid("budget_micros", "budget must be from $0 to $%s, not %d micro-dollars", FormatDollars(MaxBudget), *l.Budget)
	}
	switch limiter.Period(l.BudgetPeriod) {
	case limiter.PeriodTotal, limiter.PeriodDaily, limiter.PeriodMonthly:
	default:
		return invalid("budget_period", "budget period must be total, daily or monthly, not %q", l.BudgetPeriod)
	}
	if _, err := l.Policy(); err != nil {
		// All that is left for Policy to refuse is the burst: none for
		// sliding_window, and (burst+1) × period below 2^53.
		v, _ := errors.AsType[*ValidationError](err)
		return invalid("rate_burst", "%s", v.Message)
	}
	return nil
}

// Policy is l as the limiter enforces it, checked: a limit whose integer math
// could overflow inside the admission script is refused here. The snapshot
// calls it on limits as stored; writers call Validate, which is stricter.
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
		return p, invalid("rate_period_ms", "rate period must be a positive whole number of milliseconds, not %s", l.RatePeriod)
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

// Within is err with the field of its validation error placed inside
// prefix ("limits" + "rate_limit" is "limits.rate_limit"), for limits that
// are part of something larger, such as a tier.
func Within(prefix string, err error) error {
	if v, ok := errors.AsType[*ValidationError](err); ok {
		return &ValidationError{Field: prefix + "." + v.Field, Message: v.Message}
	}
	return err
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
	period := time.Duration(r.periodMS) * time.Millisecond
	if r.periodMS > math.MaxInt64/int64(time.Millisecond) {
		period = -1 // a hand-edited row: refused by Policy, loudly, rather than wrapped into a short period
	}
	return Limits{RateAlgorithm: r.algorithm, RateLimit: deref(r.rate), RatePeriod: period,
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
		if err := l.Validate(); err != nil {
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
		l, err = s.setTeamLimits(ctx, tx, actor, before, change(teamLimitRow(before).limits()))
		return err
	})
	if err != nil {
		return Limits{}, fmt.Errorf("store: set team %d limits: %w", teamID, err)
	}
	return l, nil
}

func (s *Store) setTeamLimits(ctx context.Context, tx pgx.Tx, actor Actor, before db.Team, l Limits) (Limits, error) {
	l, err := s.writeTeamLimits(ctx, tx, before.ID, l)
	if err != nil {
		return Limits{}, err
	}
	return l, s.audit(ctx, tx, actor, auditEntry{teamID: &before.ID, action: ActionTeamLimits, target: before.Name,
		before: teamLimitRow(before).limits(), after: l})
}

// writeTeamLimits stores l, checked, as a team's limits, unaudited: a new
// team's budget is audited as part of the team's creation.
func (s *Store) writeTeamLimits(ctx context.Context, tx pgx.Tx, teamID int64, l Limits) (Limits, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return Limits{}, err
	}
	if _, err := s.q.TeamSetLimits(ctx, tx, db.TeamSetLimitsParams{ID: teamID, RateAlgorithm: l.RateAlgorithm,
		RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(), RateBurst: orNull(l.RateBurst),
		Concurrency: orNull(l.Concurrency), TokensPerMinute: orNull(l.TokensPerMinute),
		BudgetMicros: l.Budget, BudgetPeriod: l.BudgetPeriod}); err != nil {
		return Limits{}, mapErr(err)
	}
	return l, nil
}
