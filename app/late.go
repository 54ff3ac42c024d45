package app

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

// maxLateRows bounds the rows waiting to be charged late; past it the oldest
// batch is dropped (and logged): Redis has been unreachable for that long.
const maxLateRows = 100000

// lateCharges hands the Redis limiter what each ledger flush did: the teams'
// durable watermarks, and the rows that reached Postgres after a rebuild may
// have read it (limiter.Redis.ChargeLate). A charge Redis could not take, or
// that has no counters to go to yet, is tried again after the next flush; the
// charge is idempotent, so a retry never counts a row twice. It runs on the
// ledger's flush loop only.
type lateCharges struct {
	lim     *limiter.Redis
	log     *slog.Logger
	waiting []lateBatch
	rows    int
}

type lateBatch struct {
	team string
	gen  int64
	rows []limiter.LateRow
}

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
		l.waiting = append(l.waiting, lateBatch{team: strconv.FormatInt(team, 10), gen: f.Teams[team].RebuildGen, rows: rows})
		l.rows += len(rows)
	}
	for l.rows > maxLateRows {
		l.log.Error("ledger rows dropped from the late charge: Redis has not taken them; the team's counters may miss them until it is rebuilt",
			"team", l.waiting[0].team, "rows", len(l.waiting[0].rows))
		l.rows -= len(l.waiting[0].rows)
		l.waiting = l.waiting[1:]
	}
	kept := l.waiting[:0]
	for _, b := range l.waiting {
		n, err := l.lim.ChargeLate(ctx, b.team, b.gen, b.rows)
		switch {
		case err == nil:
			l.rows -= len(b.rows)
			if n > 0 {
				l.log.Warn("ledger rows charged to the team's counters late: they reached Postgres after a rebuild had read it",
					"team", b.team, "rows", n)
			}
			continue
		case !errors.Is(err, limiter.ErrNoCounters):
			l.log.Warn("late charge of ledger rows failed; will retry", "team", b.team, "rows", len(b.rows), "err", err)
		}
		kept = append(kept, b)
	}
	clear(l.waiting[len(kept):])
	l.waiting = kept
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
