package app

import (
	"context"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
)

// periodClock is the limiter's clock (Redis TIME), which admission reads budget
// periods on; both limiters have one.
type periodClock interface {
	Now(ctx context.Context) (time.Time, error)
}

// teamState is a team's spend in each budget period, from the ledger in Postgres
// plus the rows this replica has not flushed yet, for rebuilding Redis's counters
// after it lost them. Rows other replicas have not flushed are missing: at most
// one ledger flush interval of their spend (200 ms by default). The periods are
// those of the limiter's clock, not this replica's: a replica whose clock is off
// near midnight would otherwise sum the wrong day.
func (a *App) teamState(ctx context.Context, teamID int64) (limiter.TeamState, error) {
	now, err := a.clock.Now(ctx)
	if err != nil {
		return limiter.TeamState{}, err
	}
	now = now.UTC()
	snap := a.Snapshots.Current()
	state := limiter.TeamState{At: now, Team: map[limiter.Period]int64{}, Members: map[string]map[limiter.Period]int64{}}
	members := snap.TeamMembers(teamID)
	periods := map[limiter.Period]bool{}
	if t, ok := snap.Team(teamID); ok && t.Limits.Budget != nil {
		periods[t.Limits.Budget.Period] = true
	}
	for _, m := range members {
		if m.Limits.Budget != nil {
			periods[m.Limits.Budget.Period] = true
		}
	}
	for p := range periods {
		since := store.PeriodStart(string(p), now)
		spent, err := a.Store.SpendSince(ctx, teamID, since)
		if err != nil {
			return state, err
		}
		for _, e := range a.ledger.Pending() {
			if e.TeamID == teamID && e.Status != proxy.LedgerHeld && !e.CreatedAt.Before(since) {
				spent[e.MemberID] = proxy.AddSpend(spent[e.MemberID], e.CostMicros)
			}
		}
		for _, m := range members {
			id := strconv.FormatInt(m.ID, 10)
			if state.Members[id] == nil {
				state.Members[id] = map[limiter.Period]int64{}
			}
			state.Members[id][p] = spent[m.ID]
			state.Team[p] = proxy.AddSpend(state.Team[p], spent[m.ID])
		}
	}
	state.RevokedKeys = snap.RevokedKeys(teamID)
	for _, m := range members {
		if m.Disabled {
			state.CutOff = append(state.CutOff, strconv.FormatInt(m.ID, 10))
		}
	}
	return state, nil
}
