package alert

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// thresholds are the shares of a budget whose crossing is an alert, in percent.
var thresholds = []int64{80, 100}

// CheckBudgets queues an alert for each budget of a team with webhooks (each
// member's, the team's) whose spend in its current period has reached 80% or
// 100%. Each fires once per budget, figure and period across every replica
// (store.Alert's mark): a raised budget crossed again alerts again. Spend is
// the ledger's, as the dashboard's bars show it: written in batches, so a
// crossing is seen within a ledger flush and a check.
func (w *Worker) CheckBudgets(ctx context.Context) error {
	teams, err := w.st.WebhookTeams(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, teamID := range teams {
		if err := w.checkTeam(ctx, teamID, now); err != nil {
			return fmt.Errorf("alerts: team %d budgets: %w", teamID, err)
		}
	}
	return nil
}

func (w *Worker) checkTeam(ctx context.Context, teamID int64, now time.Time) error {
	members, err := w.st.Members(ctx, teamID)
	if err != nil {
		return err
	}
	limits, err := w.st.TeamMemberLimits(ctx, teamID)
	if err != nil {
		return err
	}
	team, err := w.st.TeamLimits(ctx, teamID)
	if err != nil {
		return err
	}
	spend := map[string]map[int64]int64{}
	spendIn := func(period string) (map[int64]int64, error) {
		if s, ok := spend[period]; ok {
			return s, nil
		}
		s, err := w.st.SpendSince(ctx, teamID, store.PeriodStart(period, now))
		spend[period] = s
		return s, err
	}
	for _, m := range members {
		l, ok := limits[m.ID]
		if !ok || l.Budget == nil {
			continue
		}
		s, err := spendIn(l.BudgetPeriod)
		if err != nil {
			return err
		}
		if err := w.crossed(ctx, teamID, fmt.Sprintf("member %d", m.ID), m.Email+"'s budget",
			map[string]any{"member_id": m.ID, "email": m.Email}, *l.Budget, s[m.ID], l.BudgetPeriod, now); err != nil {
			return err
		}
	}
	if team.Budget == nil {
		return nil
	}
	s, err := spendIn(team.BudgetPeriod)
	if err != nil {
		return err
	}
	var sum int64
	for _, v := range s {
		sum += v
	}
	return w.crossed(ctx, teamID, "team", "the team's budget", map[string]any{}, *team.Budget, sum, team.BudgetPeriod, now)
}

// crossed queues the highest threshold spent has reached, and marks the lower
// ones too, so that a jump from 50% to 120% is one alert, not two.
func (w *Worker) crossed(ctx context.Context, teamID int64, who, what string, data map[string]any, budget, spent int64,
	period string, now time.Time) error {
	start := store.PeriodStart(period, now).Format(time.DateOnly)
	for i := len(thresholds) - 1; i >= 0; i-- {
		th := thresholds[i]
		if spent*100 < budget*th {
			continue
		}
		data["threshold_percent"], data["budget_micros"], data["spent_micros"], data["budget_period"], data["period_start"] =
			th, budget, spent, period, start
		ev := store.Event{Type: store.EventBudgetThreshold, Data: data,
			Text: fmt.Sprintf("tollgate: %s is %d%% spent: $%s of $%s (%s)", what, th, store.FormatDollars(spent),
				store.FormatDollars(budget), period)}
		for _, lower := range thresholds[:i+1] {
			mark := fmt.Sprintf("budget %d%% %s %d %s %s", lower, who, budget, period, start)
			if lower == th {
				if err := w.st.Alert(ctx, teamID, mark, ev); err != nil {
					return err
				}
			} else if err := w.st.Mark(ctx, teamID, mark); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}
