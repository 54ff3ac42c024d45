package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// A new team starts limited, sized for a hackathon team sharing one account:
// a member's runaway loop stops at the default tier's limits, and the whole
// team's spend at the team budget, before the lead has opened a settings page.
// Any of it can be changed, and "no limit" can be chosen, but never by omission.
const (
	DefaultTierName   = "default"
	DefaultTeamBudget = 100_000_000 // micro-dollars a month: $100
)

// Tier choices for a new member or an invite, besides a tier's name.
const (
	TierDefault = ""     // the team's default tier, or none if the team has none
	TierNone    = "none" // no tier: only the member's own limits, if any, bind
)

// DefaultTierLimits are the limits of a new team's default tier: 60 requests a
// minute, 100k tokens a minute, 4 requests in flight and $20 a month each.
func DefaultTierLimits() Limits {
	l := NoLimits()
	l.RateLimit, l.RatePeriod = 60, time.Minute
	l.TokensPerMinute = 100_000
	l.Concurrency = 4
	l.Budget = ptr(int64(20_000_000))
	return l
}

// giveDefaults gives a team, just created inside tx, its default tier and team
// budget, unaudited: the team's creation is audited with them.
func (s *Store) giveDefaults(ctx context.Context, tx pgx.Tx, teamID int64) (Tier, Limits, error) {
	tier := NewTier(DefaultTierName)
	tier.Limits = DefaultTierLimits()
	tier, err := s.insertTier(ctx, tx, teamID, tier)
	if err != nil {
		return Tier{}, Limits{}, err
	}
	if _, err := s.q.TeamSetDefaultTier(ctx, tx, db.TeamSetDefaultTierParams{ID: teamID, DefaultTierID: &tier.ID}); err != nil {
		return Tier{}, Limits{}, mapErr(err)
	}
	budget := NoLimits()
	budget.Budget = ptr(int64(DefaultTeamBudget))
	limits, err := s.writeTeamLimits(ctx, tx, teamID, budget)
	return tier, limits, err
}

// DefaultTier is the tier a team's new members land in; ErrNotFound when none.
func (s *Store) DefaultTier(ctx context.Context, teamID int64) (Tier, error) {
	team, err := s.q.TeamGetByID(ctx, s.pool, teamID)
	if err != nil {
		return Tier{}, fmt.Errorf("store: team %d default tier: %w", teamID, mapErr(err))
	}
	if team.DefaultTierID == nil {
		return Tier{}, fmt.Errorf("store: team %d default tier: %w", teamID, ErrNotFound)
	}
	row, err := s.q.TierGetByID(ctx, s.pool, db.TierGetByIDParams{TeamID: teamID, ID: *team.DefaultTierID})
	if err != nil {
		return Tier{}, fmt.Errorf("store: team %d default tier: %w", teamID, mapErr(err))
	}
	return tierFrom(row), nil
}

// SetDefaultTier makes the tier named name the one the team's new members
// land in, or none when name is TierNone. Members already in the team keep
// their tier.
func (s *Store) SetDefaultTier(ctx context.Context, actor Actor, teamID int64, name string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if name == TierDefault {
			return invalid("tier", "name a tier, or %q for none", TierNone)
		}
		id, err := s.tierChoice(ctx, tx, teamID, name)
		if err != nil {
			return err
		}
		return s.setDefaultTier(ctx, tx, actor, teamID, id, name)
	})
	if err != nil {
		return fmt.Errorf("store: set team %d default tier: %w", teamID, err)
	}
	return nil
}

func (s *Store) setDefaultTier(ctx context.Context, tx pgx.Tx, actor Actor, teamID int64, tierID *int64, name string) error {
	before, err := s.q.TeamLock(ctx, tx, teamID)
	if err != nil {
		return mapErr(err)
	}
	beforeName, err := s.tierName(ctx, tx, teamID, before.DefaultTierID)
	if err != nil {
		return err
	}
	if _, err := s.q.TeamSetDefaultTier(ctx, tx, db.TeamSetDefaultTierParams{ID: teamID, DefaultTierID: tierID}); err != nil {
		return mapErr(err)
	}
	if tierID == nil {
		name = "" // as AssignTier audits no tier
	}
	return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTeamDefaultTier, target: before.Name,
		before: map[string]string{"tier": beforeName}, after: map[string]string{"tier": name}})
}

// tierChoice is the tier id a choice names: the team's default tier for
// TierDefault, nil for TierNone, else the tier of that name.
func (s *Store) tierChoice(ctx context.Context, tx pgx.Tx, teamID int64, choice string) (*int64, error) {
	switch choice {
	case TierDefault:
		team, err := s.q.TeamGetByID(ctx, tx, teamID)
		if err != nil {
			return nil, mapErr(err)
		}
		return team.DefaultTierID, nil
	case TierNone:
		return nil, nil
	}
	t, err := s.q.TierGetByName(ctx, tx, db.TierGetByNameParams{TeamID: teamID, Name: choice})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, invalid("tier", "the team has no tier named %q; choose one of its tiers or %q", choice, TierNone)
	}
	if err != nil {
		return nil, err
	}
	return &t.ID, nil
}
