package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Tier is a named preset of member limits in one team. A member assigned to a
// tier has its limits, except where the member has a limit of their own: an
// explicit member override wins over the tier (see EffectiveLimits).
type Tier struct {
	ID     int64  `json:"id"`
	TeamID int64  `json:"team_id"`
	Name   string `json:"name"`
	Limits Limits `json:"limits"`
	// Weight is the members' share under contention, kept for the fair waiting room.
	Weight int64 `json:"weight"`
	// AutoApprove is, in micro-dollars, how much a member of the tier may be
	// granted per budget period by auto-approved requests; 0: none.
	AutoApprove int64 `json:"auto_approve_micros"`
	// OverBudget is what happens to a member's request whose worst case does not
	// fit the budget left: refuse it, or lower its output cap to fit.
	OverBudget OverBudget `json:"over_budget"`
	// Members counts the members assigned (set by Tiers only).
	Members   int64     `json:"members"`
	UpdatedAt time.Time `json:"updated_at"`
}

// OverBudget is what a tier (or a team, for members in no tier) does with a
// request whose worst case does not fit the budget left.
type OverBudget string

const (
	OverBudgetRefuse OverBudget = "refuse" // 402, saying what the request would hold
	// OverBudgetFit lowers the request's output cap to what the budget left covers
	// (at least proxy.FitFloorTokens) and forwards it.
	OverBudgetFit OverBudget = "fit"
)

// ParseOverBudget reads "refuse" or "fit"; "" is refuse.
func ParseOverBudget(s string) (OverBudget, error) {
	switch o := OverBudget(s); o {
	case "":
		return OverBudgetRefuse, nil
	case OverBudgetRefuse, OverBudgetFit:
		return o, nil
	}
	return "", invalid("over_budget", "over budget must be %q or %q, not %q", OverBudgetRefuse, OverBudgetFit, s)
}

// MaxTierWeight bounds a tier's weight (the schema checks it too).
const MaxTierWeight = 1000

func tierFrom(t db.Tier) Tier {
	return Tier{ID: t.ID, TeamID: t.TeamID, Name: t.Name, Weight: t.Weight, AutoApprove: t.AutoApproveMicros,
		OverBudget: OverBudget(t.OverBudget), UpdatedAt: t.UpdatedAt,
		Limits: limitRow{t.RateAlgorithm, t.RateLimit, t.RatePeriodMs, t.RateBurst, t.Concurrency, t.TokensPerMinute, t.BudgetMicros, t.BudgetPeriod}.limits()}
}

// NewTier is what a tier starts as: no limits, weight 1, no auto-approval.
func NewTier(name string) Tier {
	return Tier{Name: name, Limits: NoLimits(), Weight: 1, OverBudget: OverBudgetRefuse}
}

func (t Tier) check() (Tier, error) {
	t.Limits = t.Limits.withDefaults()
	if t.Limits.RatePeriod == 0 && t.Limits.RateLimit == 0 {
		t.Limits.RatePeriod = time.Second // the column's default: a tier without a rate limit need not name one
	}
	if err := checkText("name", "tier name", t.Name); err != nil {
		return t, err
	}
	if !teamName.MatchString(t.Name) {
		return t, invalid("name", "tier name %q must be 1-63 lower-case letters, digits or dashes, starting with a letter or digit", t.Name)
	}
	var err error
	if t.OverBudget, err = ParseOverBudget(string(t.OverBudget)); err != nil {
		return t, err
	}
	if t.Weight < 1 || t.Weight > MaxTierWeight {
		return t, invalid("weight", "weight must be from 1 to %d, not %d", MaxTierWeight, t.Weight)
	}
	if t.AutoApprove < 0 || t.AutoApprove > MaxBudgetRequest {
		return t, invalid("auto_approve_micros", "auto-approve ceiling must be from $0 to $%s", FormatDollars(MaxBudgetRequest))
	}
	if err := t.Limits.Validate(); err != nil {
		return t, Within("limits", err)
	}
	return t, nil
}

// CreateTier adds a tier to a team.
func (s *Store) CreateTier(ctx context.Context, actor Actor, teamID int64, t Tier) (Tier, error) {
	t, err := t.check()
	if err != nil {
		return Tier{}, err
	}
	if t.Name == TierNone {
		return Tier{}, invalid("name", "%q means no tier wherever a tier is chosen; pick another name", TierNone)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		t, err = s.createTier(ctx, tx, actor, teamID, t)
		return err
	})
	if err != nil {
		return Tier{}, fmt.Errorf("store: create tier %q: %w", t.Name, err)
	}
	return t, nil
}

func (s *Store) createTier(ctx context.Context, tx pgx.Tx, actor Actor, teamID int64, t Tier) (Tier, error) {
	t, err := s.insertTier(ctx, tx, teamID, t)
	if err != nil {
		return Tier{}, err
	}
	return t, s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTierCreate, target: t.Name, after: t})
}

// insertTier stores t, already checked, unaudited: a new team's default tier is
// audited as part of the team's creation.
func (s *Store) insertTier(ctx context.Context, tx pgx.Tx, teamID int64, t Tier) (Tier, error) {
	l := t.Limits
	row, err := s.q.TierCreate(ctx, tx, db.TierCreateParams{TeamID: teamID, Name: t.Name, RateAlgorithm: l.RateAlgorithm,
		RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(), RateBurst: orNull(l.RateBurst),
		Concurrency: orNull(l.Concurrency), TokensPerMinute: orNull(l.TokensPerMinute), BudgetMicros: l.Budget,
		BudgetPeriod: l.BudgetPeriod, Weight: t.Weight, AutoApproveMicros: t.AutoApprove, OverBudget: string(t.OverBudget)})
	if err != nil {
		return Tier{}, mapErr(err)
	}
	return tierFrom(row), nil
}

// ChangeTier applies change to a tier as stored, with its row locked (two
// concurrent changes of different fields both land). Every member of the tier
// has the new limits at their next request on every replica.
func (s *Store) ChangeTier(ctx context.Context, actor Actor, teamID int64, name string, change func(Tier) Tier) (Tier, error) {
	var t Tier
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.TierLockByName(ctx, tx, db.TierLockByNameParams{TeamID: teamID, Name: name})
		if err != nil {
			return mapErr(err)
		}
		before := tierFrom(row)
		after := change(before)
		// Which tier is changed is not the caller's to change.
		after.ID, after.TeamID, after.Name = before.ID, before.TeamID, before.Name
		if after, err = after.check(); err != nil {
			return err
		}
		l := after.Limits
		row, err = s.q.TierUpdate(ctx, tx, db.TierUpdateParams{TeamID: teamID, ID: before.ID, RateAlgorithm: l.RateAlgorithm,
			RateLimit: orNull(l.RateLimit), RatePeriodMs: l.RatePeriod.Milliseconds(), RateBurst: orNull(l.RateBurst),
			Concurrency: orNull(l.Concurrency), TokensPerMinute: orNull(l.TokensPerMinute), BudgetMicros: l.Budget,
			BudgetPeriod: l.BudgetPeriod, Weight: after.Weight, AutoApproveMicros: after.AutoApprove,
			OverBudget: string(after.OverBudget)})
		if err != nil {
			return mapErr(err)
		}
		t = tierFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTierUpdate, target: t.Name, before: before, after: t})
	})
	if err != nil {
		return Tier{}, fmt.Errorf("store: change tier %q: %w", name, err)
	}
	return t, nil
}

// DeleteTier removes a tier that no member is assigned to.
func (s *Store) DeleteTier(ctx context.Context, actor Actor, teamID int64, name string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.TierLockByName(ctx, tx, db.TierLockByNameParams{TeamID: teamID, Name: name})
		if err != nil {
			return mapErr(err)
		}
		// Assigning takes the tier's lock too, so none joins between the count and the delete.
		n, err := s.q.TierMemberCount(ctx, tx, db.TierMemberCountParams{TeamID: teamID, TierID: &row.ID})
		if err != nil {
			return err
		}
		if n > 0 {
			return stale("tier %s still has %d member(s): assign them elsewhere first", name, n)
		}
		if _, err := s.q.TierDelete(ctx, tx, db.TierDeleteParams{TeamID: teamID, ID: row.ID}); err != nil {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTierDelete, target: name, before: tierFrom(row)})
	})
	if err != nil {
		return fmt.Errorf("store: delete tier %q: %w", name, err)
	}
	return nil
}

// Tiers lists a team's tiers by name, with how many members each has.
func (s *Store) Tiers(ctx context.Context, teamID int64) ([]Tier, error) {
	rows, err := s.q.TierList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list tiers: %w", err)
	}
	tiers := make([]Tier, len(rows))
	for i, r := range rows {
		tiers[i] = tierFromListRow(r)
	}
	return tiers, nil
}

func tierFromListRow(r db.TierListRow) Tier {
	t := tierFrom(db.Tier{ID: r.ID, TeamID: r.TeamID, Name: r.Name, RateAlgorithm: r.RateAlgorithm, RateLimit: r.RateLimit,
		RatePeriodMs: r.RatePeriodMs, RateBurst: r.RateBurst, Concurrency: r.Concurrency, TokensPerMinute: r.TokensPerMinute,
		BudgetMicros: r.BudgetMicros, BudgetPeriod: r.BudgetPeriod, Weight: r.Weight, AutoApproveMicros: r.AutoApproveMicros,
		OverBudget: r.OverBudget, UpdatedAt: r.UpdatedAt})
	t.Members = r.Members
	return t
}

// FindTier resolves a tier by name or numeric id.
func (s *Store) FindTier(ctx context.Context, teamID int64, ref string) (Tier, error) {
	var (
		row db.Tier
		err error
	)
	if id, convErr := strconv.ParseInt(ref, 10, 64); convErr == nil {
		row, err = s.q.TierGetByID(ctx, s.pool, db.TierGetByIDParams{TeamID: teamID, ID: id})
	} else {
		row, err = s.q.TierGetByName(ctx, s.pool, db.TierGetByNameParams{TeamID: teamID, Name: ref})
	}
	if err != nil {
		return Tier{}, fmt.Errorf("store: tier %q: %w", ref, mapErr(err))
	}
	return tierFrom(row), nil
}

// AssignTier puts a member in the tier named tierName, or in none when it is
// "". The member's own limits stay, as overrides on top of the tier's.
func (s *Store) AssignTier(ctx context.Context, actor Actor, teamID, memberID int64, tierName string) (Member, error) {
	var m Member
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.MemberLockByID(ctx, tx, db.MemberLockByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		var tierID *int64
		if tierName != "" {
			// Locked so that a concurrent delete of the tier waits, then sees this member.
			t, err := s.q.TierLockByName(ctx, tx, db.TierLockByNameParams{TeamID: teamID, Name: tierName})
			if err != nil {
				return mapErr(err)
			}
			tierID = &t.ID
		}
		beforeName, err := s.tierName(ctx, tx, teamID, before.TierID)
		if err != nil {
			return err
		}
		row, err := s.q.MemberSetTier(ctx, tx, db.MemberSetTierParams{TeamID: teamID, ID: memberID, TierID: tierID})
		if err != nil {
			return mapErr(err)
		}
		m = memberFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberTier, target: m.Email,
			before: map[string]string{"tier": beforeName}, after: map[string]string{"tier": tierName}})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: assign member %d to tier %q: %w", memberID, tierName, err)
	}
	return m, nil
}

func (s *Store) tierName(ctx context.Context, q db.DBTX, teamID int64, id *int64) (string, error) {
	if id == nil {
		return "", nil
	}
	t, err := s.q.TierGetByID(ctx, q, db.TierGetByIDParams{TeamID: teamID, ID: *id})
	if err != nil {
		return "", mapErr(err)
	}
	return t.Name, nil
}

// Resolve is the limits of a member with own limits in a tier with tier
// limits: each kind of limit the member has set wins over the tier's, and a
// kind the member has not set is the tier's. The rate limit travels with its
// algorithm, period and burst, and the budget with its period. A member in a
// tier cannot lift one of the tier's limits (a 0 of their own means "the
// tier's"); without a tier, tier is NoLimits and the member's limits are as set.
func Resolve(tier, own Limits) Limits {
	l := tier.withDefaults()
	own = own.withDefaults()
	if own.RateLimit > 0 {
		l.RateAlgorithm, l.RateLimit, l.RatePeriod, l.RateBurst = own.RateAlgorithm, own.RateLimit, own.RatePeriod, own.RateBurst
	}
	if own.Concurrency > 0 {
		l.Concurrency = own.Concurrency
	}
	if own.TokensPerMinute > 0 {
		l.TokensPerMinute = own.TokensPerMinute
	}
	if own.Budget != nil {
		l.Budget, l.BudgetPeriod = own.Budget, own.BudgetPeriod
	}
	return l
}

// Effective is what binds a member now, and where it comes from.
type Effective struct {
	Tier   string `json:"tier,omitempty"` // "" when in none
	Own    Limits `json:"own"`            // the member's own limits (overrides)
	Limits Limits `json:"limits"`         // Resolve(tier, own), before grants
	// Granted is what approved budget requests add to the budget in the current period.
	Granted int64 `json:"granted_micros"`
}

// Budget is the member's budget in the current period, grants included; nil: none.
func (e Effective) Budget() *int64 {
	if e.Limits.Budget == nil {
		return nil
	}
	b := *e.Limits.Budget + e.Granted
	return &b
}

// EffectiveLimits returns the limits that bind a member, as the replicas have
// them after their next reload.
func (s *Store) EffectiveLimits(ctx context.Context, teamID, memberID int64) (Effective, error) {
	var e Effective
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		e, err = s.effective(ctx, tx, teamID, memberID)
		return err
	})
	if err != nil {
		return Effective{}, fmt.Errorf("store: member %d effective limits: %w", memberID, err)
	}
	return e, nil
}

func (s *Store) effective(ctx context.Context, tx pgx.Tx, teamID, memberID int64) (Effective, error) {
	m, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: teamID, ID: memberID})
	if err != nil {
		return Effective{}, mapErr(err)
	}
	e := Effective{Own: NoLimits()}
	switch row, err := s.q.MemberLimitGet(ctx, tx, db.MemberLimitGetParams{TeamID: teamID, MemberID: memberID}); {
	case err == nil:
		e.Own = memberLimitRow(row).limits()
	case !errors.Is(err, pgx.ErrNoRows):
		return Effective{}, err
	}
	tierLimits := NoLimits()
	if m.TierID != nil {
		t, err := s.q.TierGetByID(ctx, tx, db.TierGetByIDParams{TeamID: teamID, ID: *m.TierID})
		if err != nil {
			return Effective{}, mapErr(err)
		}
		e.Tier, tierLimits = t.Name, tierFrom(t).Limits
	}
	e.Limits = Resolve(tierLimits, e.Own)
	now, err := txNow(ctx, tx)
	if err != nil {
		return Effective{}, err
	}
	e.Granted, err = s.q.BudgetGrantSum(ctx, tx, db.BudgetGrantSumParams{TeamID: teamID, MemberID: memberID,
		BudgetPeriod: &e.Limits.BudgetPeriod, PeriodStart: ptr(PeriodStart(e.Limits.BudgetPeriod, now))})
	return e, err
}

func txNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var now time.Time
	err := tx.QueryRow(ctx, "SELECT now()").Scan(&now)
	return now, err
}

func ptr[T any](v T) *T { return &v }
