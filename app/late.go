package app

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

// lateCharges hands the Redis limiter what each ledger flush did: the teams'
// durable watermarks, and the rows that reached Postgres after a rebuild may
// have read it (limiter.Redis.ChargeLate). A charge Redis does not take (it is
// unreachable from here, or the team has no counters yet) is marked in
// Postgres instead (store.MarkLateCharge), and every replica's watch has the
// marked team's counters rebuilt from the ledger, which holds the rows now. So
// the charge outlives this process.
type lateCharges struct {
	lim *limiter.Redis
	st  *store.Store
	log *slog.Logger
	// unmarked holds the marks Postgres did not take, per team: tried again at
	// the next flush.
	unmarked map[int64]int64
}

// lateWatchInterval is how often each replica looks for marked teams.
const lateWatchInterval = time.Second

func (l *lateCharges) flushed(ctx context.Context, f store.LedgerFlush) {
	for team, c := range f.Teams {
		l.lim.NoteWatermark(strconv.FormatInt(team, 10), c.Epoch, c.Seq)
	}
	byTeam := map[int64][]limiter.LateRow{}
	for _, e := range f.Final {
		// A row no counters counted (no budget or TPM applied) or that cost
		// nothing has nothing to charge.
		if e.Epoch != 0 && e.CostMicros > 0 {
			byTeam[e.TeamID] = append(byTeam[e.TeamID], limiter.LateRow{RequestID: e.RequestID,
				Member: strconv.FormatInt(e.MemberID, 10), Cost: e.CostMicros, Epoch: e.Epoch})
		}
	}
	for team, rows := range byTeam {
		gen := f.Teams[team].RebuildGen
		n, err := l.lim.ChargeLate(ctx, strconv.FormatInt(team, 10), gen, rows)
		switch {
		case err == nil:
			if n > 0 {
				l.log.Warn("ledger rows charged to the team's counters late: they reached Postgres after a rebuild had read it",
					"team", team, "rows", n)
			}
			continue
		case !errors.Is(err, limiter.ErrNoCounters):
			l.log.Warn("late charge of ledger rows failed; the team's counters will be rebuilt instead", "team", team, "rows", len(rows), "err", err)
		}
		if l.unmarked == nil {
			l.unmarked = map[int64]int64{}
		}
		l.unmarked[team] = max(l.unmarked[team], gen)
	}
	for team, gen := range l.unmarked {
		if err := l.st.MarkLateCharge(ctx, team, gen); err != nil {
			l.log.Error("late charge not marked; will retry at the next flush", "team", team, "err", err)
			continue
		}
		delete(l.unmarked, team)
	}
}

// watch, on every replica, makes sure each marked team's counters come from a
// rebuild after its mark, then clears the mark.
func (l *lateCharges) watch(ctx context.Context) {
	t := time.NewTicker(lateWatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		marks, err := l.st.LateMarks(ctx)
		if err != nil {
			continue // Postgres is away: the ledger's own health says so
		}
		for team, gen := range marks {
			done, err := l.lim.RebuiltAfter(ctx, strconv.FormatInt(team, 10), gen)
			if err != nil || !done {
				continue
			}
			if err := l.st.ClearLateMark(ctx, team, gen); err != nil {
				l.log.Warn("late mark not cleared; will retry", "team", team, "err", err)
			}
		}
	}
}

// loadWatermarks tells the limiter, before this replica admits anything, how far
// every team's counters are known to have come: the durable watermarks, and
// the rows an earlier process left in the spool (not in Postgres yet). So a
// replica that has not read a team since it started still rebuilds counters
// restored from an older snapshot instead of believing them.
func loadWatermarks(ctx context.Context, st *store.Store, lw *ledger.Writer, lim *limiter.Redis) error {
	wms, err := st.TeamWatermarks(ctx)
	if err != nil {
		return err
	}
	for team, c := range wms {
		lim.NoteWatermark(strconv.FormatInt(team, 10), c.Epoch, c.Seq)
	}
	for _, e := range lw.Pending() {
		lim.NoteWatermark(strconv.FormatInt(e.TeamID, 10), e.Epoch, e.Seq)
	}
	return nil
}
