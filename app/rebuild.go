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
// after it lost them. The periods are those of the limiter's clock, not this
// replica's: a replica whose clock is off near midnight would otherwise sum the
// wrong day.
//
// The ledger is read under a new rebuild generation (store.LockRebuild), so the
// rows other replicas had not written yet (one flush interval's, or a whole
// Postgres outage's spool) land in it or a later one, and their writer charges
// them to the counters this rebuild builds (lateCharges). This replica's own
// unwritten rows are counted here and listed, so that they are not charged again.
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
	err = a.Store.LockRebuild(ctx, teamID, func(gen int64, ledger store.LedgerReader) error {
		state.Generation = gen
		// This replica's unflushed rows, read once the generation is taken: a
		// flush that took them before is either in Postgres now or lands in this
		// generation.
		pending := a.ledger.Pending()
		for _, e := range pending {
			if e.TeamID == teamID && e.Status != proxy.LedgerHeld {
				state.Counted = append(state.Counted, e.RequestID)
			}
		}
		for p := range periods {
			since := store.PeriodStart(string(p), now)
			spent, err := ledger.SpendSince(ctx, teamID, since)
			if err != nil {
				return err
			}
			for _, e := range pending {
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
		return a.heldRequests(ctx, ledger, teamID, now, pending, &state)
	})
	if err != nil {
		return state, err
	}
	state.RevokedKeys = snap.RevokedKeys(teamID)
	for _, m := range members {
		if m.Disabled {
			state.CutOff = append(state.CutOff, strconv.FormatInt(m.ID, 10))
		}
	}
	return state, nil
}

// heldRequests adds to state the team's requests still in flight, from the ledger's
// held rows and this replica's unflushed ones (pending): each holds its amount again until it
// settles at its real cost, or until its lease ends. A request that another replica
// settled within its last flush interval still shows as held; its hold then lasts
// until its lease ends and is charged in full (an over-count, never an under-count).
func (a *App) heldRequests(ctx context.Context, ledger store.LedgerReader, teamID int64, now time.Time, pending []proxy.LedgerEntry, state *limiter.TeamState) error {
	lease := a.cfg.ConcurrencyLease
	since := now.Add(-lease)
	rows, err := ledger.HeldSince(ctx, teamID, since)
	if err != nil {
		return err
	}
	local := map[string]proxy.LedgerStatus{}
	for _, e := range pending {
		if e.TeamID != teamID {
			continue
		}
		local[e.RequestID] = e.Status
		if e.Status == proxy.LedgerHeld && !e.CreatedAt.Before(since) {
			rows = append(rows, e)
		}
	}
	snap := a.Snapshots.Current()
	var teamBudget limiter.Period
	if t, ok := snap.Team(teamID); ok && t.Limits.Budget != nil {
		teamBudget = t.Limits.Budget.Period
	}
	seen := map[string]bool{}
	for _, e := range rows {
		if seen[e.RequestID] || (local[e.RequestID] != "" && local[e.RequestID] != proxy.LedgerHeld) {
			continue // listed twice, or settled here and not flushed yet (counted as spent)
		}
		seen[e.RequestID] = true
		h := limiter.RebuiltHold{RequestID: e.RequestID, Member: strconv.FormatInt(e.MemberID, 10), Hold: e.HeldMicros,
			TeamBudget: teamBudget, Expires: e.CreatedAt.Add(lease), Meta: proxy.HoldMeta(e.MemberID, e.KeyID, e.RouteID, e.Model)}
		if m, ok := snap.Member(e.MemberID); ok && m.Limits.Budget != nil {
			h.MemberBudget = m.Limits.Budget.Period
		}
		state.Holds = append(state.Holds, h)
	}
	return nil
}
