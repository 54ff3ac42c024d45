package store

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// WriteLedger upserts entries in one round trip, then records the keys' last
// use in another. A row already final (settled,
// uncertain, implausible, released) is never reverted by a late held entry, so batches may be
// written in any order and retried.
func (s *Store) WriteLedger(ctx context.Context, entries []proxy.LedgerEntry) error {
	params := make([]db.LedgerUpsertParams, len(entries))
	for i, e := range entries {
		p := db.LedgerUpsertParams{TeamID: e.TeamID, RequestID: e.RequestID, MemberID: e.MemberID, KeyID: e.KeyID,
			Model: e.Model, Status: string(e.Status), InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
			CacheWriteTokens: e.Usage.CacheWriteTokens, CacheReadTokens: e.Usage.CacheReadTokens,
			ReasoningTokens: e.Usage.ReasoningTokens, HeldMicros: e.HeldMicros, CostMicros: e.CostMicros, CreatedAt: e.CreatedAt}
		if e.RouteID != 0 {
			p.RouteID = &e.RouteID
		}
		if e.HTTPStatus != 0 {
			status := int32(e.HTTPStatus)
			p.HttpStatus = &status
		}
		if !e.SettledAt.IsZero() {
			p.SettledAt = &e.SettledAt
		}
		params[i] = p
	}
	var firstErr error
	results := s.q.LedgerUpsert(ctx, s.pool, params)
	results.Exec(func(_ int, err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if err := results.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return fmt.Errorf("store: write %d ledger rows: %w", len(entries), firstErr)
	}
	// Keys' last use rides on the batch: one statement per flush, off the
	// request path. A failure retries with the batch, which is harmless.
	if err := s.recordKeyUse(ctx, entries); err != nil {
		return fmt.Errorf("store: record keys' last use: %w", err)
	}
	return nil
}

// recordKeyUse stores, for each key in entries, its newest request's time.
func (s *Store) recordKeyUse(ctx context.Context, entries []proxy.LedgerEntry) error {
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
	return s.q.KeyUseRecord(ctx, s.pool, p)
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
	rows, err := s.q.LedgerHeldSince(ctx, s.pool, db.LedgerHeldSinceParams{TeamID: teamID, Since: since})
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
	rows, err := s.q.LedgerSpendSince(ctx, s.pool, db.LedgerSpendSinceParams{TeamID: teamID, Since: since,
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
