package store

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Team is a group sharing one provider account.
type Team struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// PasswordSignIn is false when the team signs in through SSO only.
	PasswordSignIn bool `json:"password_sign_in"`
	// OverBudget is what happens to the request of a member in no tier whose worst
	// case does not fit the budget left (a tier says it for its members).
	OverBudget OverBudget `json:"over_budget"`
}

func teamFrom(t db.Team) Team {
	return Team{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, PasswordSignIn: t.PasswordSignIn, OverBudget: OverBudget(t.OverBudget)}
}

// SetTeamOverBudget sets what happens to the requests of members in no tier whose
// worst case does not fit the budget left.
func (s *Store) SetTeamOverBudget(ctx context.Context, actor Actor, teamID int64, o OverBudget) (Team, error) {
	o, err := ParseOverBudget(string(o))
	if err != nil {
		return Team{}, err
	}
	var t Team
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.TeamLock(ctx, tx, teamID)
		if err != nil {
			return mapErr(err)
		}
		row, err := s.q.TeamSetOverBudget(ctx, tx, db.TeamSetOverBudgetParams{ID: teamID, OverBudget: string(o)})
		if err != nil {
			return mapErr(err)
		}
		t = teamFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionTeamOverBudget, target: t.Name,
			before: map[string]string{"over_budget": before.OverBudget}, after: map[string]string{"over_budget": string(o)}})
	})
	if err != nil {
		return Team{}, fmt.Errorf("store: set team %d over budget: %w", teamID, err)
	}
	return t, nil
}

var teamName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CreateTeam creates a team, with a default tier its new members land in and
// a team budget (see DefaultTierLimits and DefaultTeamBudget).
func (s *Store) CreateTeam(ctx context.Context, actor Actor, name string) (Team, error) {
	if err := checkTeamName(name); err != nil {
		return Team{}, err
	}
	var team Team
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		team, err = s.createTeam(ctx, tx, actor, name)
		return err
	})
	if err != nil {
		return Team{}, fmt.Errorf("store: create team %q: %w", name, err)
	}
	return team, nil
}

func checkTeamName(name string) error {
	if err := checkText("name", "team name", name); err != nil {
		return err
	}
	if !teamName.MatchString(name) {
		return invalid("name", "team name %q must be 1-63 lower-case letters, digits or dashes, starting with a letter or digit", name)
	}
	return nil
}

// createTeam is CreateTeam inside the caller's transaction (first-run setup
// creates the team and its owner together).
func (s *Store) createTeam(ctx context.Context, tx pgx.Tx, actor Actor, name string) (Team, error) {
	row, err := s.q.TeamCreate(ctx, tx, name)
	if err != nil {
		return Team{}, mapErr(err)
	}
	team := teamFrom(row)
	tier, limits, err := s.giveDefaults(ctx, tx, team.ID)
	if err != nil {
		return Team{}, err
	}
	// One row for one write, saying what the team was made with.
	return team, s.audit(ctx, tx, actor, auditEntry{teamID: &team.ID, action: ActionTeamCreate, target: name, after: struct {
		Team
		DefaultTier Tier   `json:"default_tier"`
		Limits      Limits `json:"limits"`
	}{team, tier, limits}})
}

// FindTeam resolves a team by name or numeric id.
func (s *Store) FindTeam(ctx context.Context, ref string) (Team, error) {
	var (
		row db.Team
		err error
	)
	if id, convErr := strconv.ParseInt(ref, 10, 64); convErr == nil {
		row, err = s.q.TeamGetByID(ctx, s.pool, id)
	} else {
		row, err = s.q.TeamGetByName(ctx, s.pool, ref)
	}
	if err != nil {
		return Team{}, fmt.Errorf("store: team %q: %w", ref, mapErr(err))
	}
	return teamFrom(row), nil
}

// Teams lists every team.
func (s *Store) Teams(ctx context.Context) ([]Team, error) {
	rows, err := s.q.TeamList(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: list teams: %w", err)
	}
	teams := make([]Team, len(rows))
	for i, r := range rows {
		teams[i] = teamFrom(r)
	}
	return teams, nil
}
