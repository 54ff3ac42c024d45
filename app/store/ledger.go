package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// WriteLedger writes entries as FlushLedger does, for callers that need
// nothing back.
func (s *Store) WriteLedger(ctx context.Context, entries []proxy.LedgerEntry) error {
	_, err := s.FlushLedger(ctx, entries)
	return err
}

// LedgerFlush is what one ledger write tells the admission counters.
type LedgerFlush struct {
	// Teams has each team of the batch: the rebuild generation the rows landed
	// in and the team's watermark after them.
	Teams map[int64]TeamCounters
	// Final lists the rows this write made final: Postgres had them held or not
	// at all, so a rebuild that read the ledger before it did not count them.
	Final []proxy.LedgerEntry
}

// TeamCounters is what Postgres knows of a team's admission counters.
type TeamCounters struct {
	// RebuildGen counts the rebuilds that read the team's ledger.
	RebuildGen int64
	// Epoch and Seq are the newest generation of the counters that any ledger
	// row was admitted in: its epoch and the team's admission count after it.
	Epoch, Seq int64
}

// FlushLedger upserts entries, at most one per request, in one statement of one
// transaction, ordered against rebuilds: it first reads (for share) each team's
// rebuild generation, which a rebuild takes for update before it reads the
// ledger (LockRebuild). A rebuild whose generation the rows landed in, or an
// earlier one, read the ledger without them. A row already final (settled,
// uncertain, implausible, released) is never reverted by a late held entry, so
// batches may be written in any order and retried. The teams' watermarks and
// keys' last use ride on the same transaction.
func (s *Store) FlushLedger(ctx context.Context, entries []proxy.LedgerEntry) (LedgerFlush, error) {
	out := LedgerFlush{Teams: map[int64]TeamCounters{}}
	size := len(entries)
	p := db.LedgerUpsertParams{TeamIds: make([]int64, size), RequestIds: make([]string, size), MemberIds: make([]int64, size),
		KeyIds: make([]string, size), RouteIds: make([]int64, size), Models: make([]string, size), Statuses: make([]string, size),
		HttpStatuses: make([]int32, size), InputTokens: make([]int64, size), OutputTokens: make([]int64, size),
		CacheWriteTokens: make([]int64, size), CacheReadTokens: make([]int64, size), ReasoningTokens: make([]int64, size),
		HeldMicros: make([]int64, size), CostMicros: make([]int64, size), CreatedAts: make([]time.Time, size), SettledAts: make([]time.Time, size)}
	newest := map[int64]TeamCounters{}
	byRequest := make(map[entryKey]int, size)
	for i, e := range entries {
		// The zero values stand for NULL: no route, no HTTP status, not settled.
		p.TeamIds[i], p.RequestIds[i], p.MemberIds[i], p.KeyIds[i] = e.TeamID, e.RequestID, e.MemberID, e.KeyID
		p.RouteIds[i], p.Models[i], p.Statuses[i], p.HttpStatuses[i] = e.RouteID, e.Model, string(e.Status), int32(e.HTTPStatus)
		p.InputTokens[i], p.OutputTokens[i] = e.Usage.InputTokens, e.Usage.OutputTokens
		p.CacheWriteTokens[i], p.CacheReadTokens[i], p.ReasoningTokens[i] = e.Usage.CacheWriteTokens, e.Usage.CacheReadTokens, e.Usage.ReasoningTokens
		p.HeldMicros[i], p.CostMicros[i], p.CreatedAts[i], p.SettledAts[i] = e.HeldMicros, e.CostMicros, e.CreatedAt, e.SettledAt
		k := entryKey{e.TeamID, e.RequestID}
		if _, dup := byRequest[k]; dup {
			// One statement cannot write a row twice.
			return out, fmt.Errorf("store: write ledger rows: request %s of team %d comes twice", e.RequestID, e.TeamID)
		}
		byRequest[k] = i
		if n, ok := newest[e.TeamID]; !ok || e.Epoch > n.Epoch || (e.Epoch == n.Epoch && e.Seq > n.Seq) {
			newest[e.TeamID] = TeamCounters{Epoch: e.Epoch, Seq: e.Seq}
		}
	}
	if len(entries) == 0 {
		return out, nil
	}
	teams := slices.Sorted(maps.Keys(newest))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.TeamCountersEnsure(ctx, tx, teams); err != nil {
			return err
		}
		gens, err := s.q.TeamCountersShare(ctx, tx, teams)
		if err != nil {
			return err
		}
		for _, g := range gens {
			out.Teams[g.TeamID] = TeamCounters{RebuildGen: g.RebuildGen}
		}
		rows, err := s.q.LedgerUpsert(ctx, tx, p)
		if err != nil {
			return err
		}
		final := make([]int, 0, len(rows))
		for _, row := range rows {
			if row.Status != string(proxy.LedgerHeld) {
				final = append(final, byRequest[entryKey{row.TeamID, row.RequestID}])
			}
		}
		slices.Sort(final) // in the batch's order, as RETURNING has none
		for _, i := range final {
			out.Final = append(out.Final, entries[i])
		}
		// Keys' last use rides on the batch: one statement per flush, off the
		// request path. A failure retries with the batch, which is harmless.
		return s.recordKeyUse(ctx, tx, entries)
	})
	if err != nil {
		return LedgerFlush{}, fmt.Errorf("store: write %d ledger rows: %w", len(entries), err)
	}
	// The watermarks after the rows' transaction: raised inside it, the row
	// lock would wait for other flushes' share locks while they wait for ours.
	// A crash in between leaves the watermark behind the rows, no worse than a
	// flush not made yet.
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		for _, team := range teams {
			if n := newest[team]; n.Epoch > 0 {
				if err := s.q.TeamCountersRaiseWatermark(ctx, tx, db.TeamCountersRaiseWatermarkParams{TeamID: team, WmEpoch: n.Epoch, WmSeq: n.Seq}); err != nil {
					return err
				}
			}
		}
		wms, err := s.q.TeamCountersWatermarksOf(ctx, tx, teams)
		if err != nil {
			return err
		}
		for _, w := range wms {
			c := out.Teams[w.TeamID]
			c.Epoch, c.Seq = w.WmEpoch, w.WmSeq
			out.Teams[w.TeamID] = c
		}
		return nil
	})
	if err != nil {
		// The rows are in: the caller must not write them again as if not.
		s.log.Warn("team watermarks not raised with this ledger batch; the next batch raises them", "err", err)
	}
	return out, nil
}

// LockRebuild starts a rebuild of the team's admission counters: in one
// transaction it takes the next rebuild generation, waiting for ledger writes
// under way, then runs read, whose reads of the ledger therefore see every row
// written before and none written after; those see the new generation
// (FlushLedger).
func (s *Store) LockRebuild(ctx context.Context, teamID int64, read func(gen int64, ledger LedgerReader) error) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		gen, err := s.q.TeamCountersBumpRebuild(ctx, tx, teamID)
		if err != nil {
			return err
		}
		return read(gen, LedgerReader{s: s, tx: tx})
	})
	if err != nil {
		return fmt.Errorf("store: rebuild team %d: %w", teamID, err)
	}
	return nil
}

// LedgerReader reads the ledger inside a rebuild's transaction.
type LedgerReader struct {
	s  *Store
	tx pgx.Tx
}

// SpendSince is Store.SpendSince in the rebuild's transaction.
func (r LedgerReader) SpendSince(ctx context.Context, teamID int64, since time.Time) (map[int64]int64, error) {
	return r.s.spendSince(ctx, r.tx, teamID, since)
}

// HeldSince is Store.HeldSince in the rebuild's transaction.
func (r LedgerReader) HeldSince(ctx context.Context, teamID int64, since time.Time) ([]proxy.LedgerEntry, error) {
	return r.s.heldSince(ctx, r.tx, teamID, since)
}

// TeamWatermarks is every team's durable watermark (TeamCounters's Epoch and
// Seq), which a replica starting up has seen without reading Redis.
func (s *Store) TeamWatermarks(ctx context.Context) (map[int64]TeamCounters, error) {
	rows, err := s.q.TeamCountersWatermarks(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: team watermarks: %w", err)
	}
	out := make(map[int64]TeamCounters, len(rows))
	for _, r := range rows {
		out[r.TeamID] = TeamCounters{Epoch: r.WmEpoch, Seq: r.WmSeq}
	}
	return out, nil
}

// entryKey names one request's ledger row.
type entryKey struct {
	team    int64
	request string
}

// recordKeyUse stores, for each key in entries, its newest request's time.
func (s *Store) recordKeyUse(ctx context.Context, tx pgx.Tx, entries []proxy.LedgerEntry) error {
	newest := map[string]time.Time{}
	for _, e := range entries {
		if e.KeyID != "" && e.CreatedAt.After(newest[e.KeyID]) {
			newest[e.KeyID] = e.CreatedAt
		}
	}
	if len(newest) == 0 {
		return nil
	}
	var p db.KeyUseRecordParams
	for id, at := range newest {
		p.KeyIds, p.UsedAt = append(p.KeyIds, id), append(p.UsedAt, at)
	}
	return s.q.KeyUseRecord(ctx, tx, p)
}

// KeysLastUsed maps each of a team's keys that has been used to when it last was.
func (s *Store) KeysLastUsed(ctx context.Context, teamID int64) (map[string]time.Time, error) {
	rows, err := s.q.KeyUseList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list keys' last use: %w", err)
	}
	used := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		used[r.KeyID] = r.LastUsedAt
	}
	return used, nil
}

// Ledger lists a team's newest ledger rows since a time, optionally for one member.
func (s *Store) Ledger(ctx context.Context, teamID int64, memberID *int64, since time.Time, limit int32) ([]proxy.LedgerEntry, error) {
	rows, err := s.q.LedgerList(ctx, s.pool, db.LedgerListParams{TeamID: teamID, MemberID: memberID, Since: since, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("store: list ledger: %w", err)
	}
	entries := make([]proxy.LedgerEntry, len(rows))
	for i, r := range rows {
		entries[i] = ledgerEntryFrom(r)
	}
	return entries, nil
}

func ledgerEntryFrom(r db.Ledger) proxy.LedgerEntry {
	e := proxy.LedgerEntry{TeamID: r.TeamID, MemberID: r.MemberID, KeyID: r.KeyID, RequestID: r.RequestID, Model: r.Model,
		Status: proxy.LedgerStatus(r.Status), HeldMicros: r.HeldMicros, CostMicros: r.CostMicros, CreatedAt: r.CreatedAt,
		Usage: usage.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CacheWriteTokens: r.CacheWriteTokens,
			CacheReadTokens: r.CacheReadTokens, ReasoningTokens: r.ReasoningTokens}}
	if r.RouteID != nil {
		e.RouteID = *r.RouteID
	}
	if r.HttpStatus != nil {
		e.HTTPStatus = int(*r.HttpStatus)
	}
	if r.SettledAt != nil {
		e.SettledAt = *r.SettledAt
	}
	return e
}

// LedgerFilter narrows a page of the ledger; nil and zero fields match all.
type LedgerFilter struct {
	MemberID     *int64
	Model        *string
	Status       *string
	Since, Until time.Time // Until zero: now and later
	// After is the cursor: the last row of the previous page, nil for the first.
	After *LedgerCursor
}

// LedgerCursor is a position in the ledger's newest-first order.
type LedgerCursor struct {
	CreatedAt time.Time
	RequestID string
}

// LedgerPage lists up to limit of a team's ledger rows matching f, newest first.
func (s *Store) LedgerPage(ctx context.Context, teamID int64, f LedgerFilter, limit int32) ([]proxy.LedgerEntry, error) {
	p := db.LedgerPageParams{TeamID: teamID, MemberID: f.MemberID, Model: f.Model, Status: f.Status, Since: f.Since,
		Until: f.Until, MaxRows: limit}
	if f.Until.IsZero() {
		p.Until = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if f.After != nil {
		p.AfterAt, p.AfterRequestID = &f.After.CreatedAt, &f.After.RequestID
	}
	rows, err := s.q.LedgerPage(ctx, s.pool, p)
	if err != nil {
		return nil, fmt.Errorf("store: ledger page: %w", err)
	}
	entries := make([]proxy.LedgerEntry, len(rows))
	for i, r := range rows {
		entries[i] = ledgerEntryFrom(r)
	}
	return entries, nil
}

// HeldSince lists the team's requests still held (in flight) that were admitted
// since since, as held ledger entries.
func (s *Store) HeldSince(ctx context.Context, teamID int64, since time.Time) ([]proxy.LedgerEntry, error) {
	return s.heldSince(ctx, s.pool, teamID, since)
}

func (s *Store) heldSince(ctx context.Context, q db.DBTX, teamID int64, since time.Time) ([]proxy.LedgerEntry, error) {
	rows, err := s.q.LedgerHeldSince(ctx, q, db.LedgerHeldSinceParams{TeamID: teamID, Since: since})
	if err != nil {
		return nil, fmt.Errorf("store: held since %s: %w", since, err)
	}
	held := make([]proxy.LedgerEntry, len(rows))
	for i, r := range rows {
		held[i] = proxy.LedgerEntry{TeamID: teamID, MemberID: r.MemberID, KeyID: r.KeyID, Model: r.Model,
			RequestID: r.RequestID, Status: proxy.LedgerHeld, HeldMicros: r.HeldMicros, CreatedAt: r.CreatedAt}
		if r.RouteID != nil {
			held[i].RouteID = *r.RouteID
		}
	}
	return held, nil
}

// SpendSince is each member's settled, uncertain and implausible spend since a
// period start, in micro-dollars: what the admission counters are rebuilt from. A
// row whose cost is past proxy.MaxRequestMicros counts its hold, and each sum
// saturates as proxy.AddSpend does.
func (s *Store) SpendSince(ctx context.Context, teamID int64, since time.Time) (map[int64]int64, error) {
	return s.spendSince(ctx, s.pool, teamID, since)
}

func (s *Store) spendSince(ctx context.Context, q db.DBTX, teamID int64, since time.Time) (map[int64]int64, error) {
	rows, err := s.q.LedgerSpendSince(ctx, q, db.LedgerSpendSinceParams{TeamID: teamID, Since: since,
		MaxRequestMicros: proxy.MaxRequestMicros, MaxSpent: limiter.MaxMoney})
	if err != nil {
		return nil, fmt.Errorf("store: spend since %s: %w", since, err)
	}
	spent := make(map[int64]int64, len(rows))
	for _, r := range rows {
		spent[r.MemberID] = r.Spent
	}
	return spent, nil
}

// MarkLateCharge records durably that rows which landed in rebuild generation
// gen were not charged to the team's counters (Redis did not take the late
// charge), so that any replica has the counters rebuilt after gen
// (LateMarks) even if this one dies first.
func (s *Store) MarkLateCharge(ctx context.Context, teamID, gen int64) error {
	if err := s.q.TeamCountersMarkLate(ctx, s.pool, db.TeamCountersMarkLateParams{TeamID: teamID, LateGen: gen}); err != nil {
		return fmt.Errorf("store: mark late charge of team %d: %w", teamID, err)
	}
	return nil
}

// LateMarks is each marked team's generation (MarkLateCharge).
func (s *Store) LateMarks(ctx context.Context) (map[int64]int64, error) {
	rows, err := s.q.TeamCountersLateMarks(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: late marks: %w", err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.TeamID] = r.LateGen
	}
	return out, nil
}

// ClearLateMark clears the team's mark if it is still gen: a later mark stays.
func (s *Store) ClearLateMark(ctx context.Context, teamID, gen int64) error {
	if err := s.q.TeamCountersClearLate(ctx, s.pool, db.TeamCountersClearLateParams{TeamID: teamID, LateGen: gen}); err != nil {
		return fmt.Errorf("store: clear late mark of team %d: %w", teamID, err)
	}
	return nil
}
