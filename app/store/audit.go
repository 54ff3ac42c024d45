package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/app/db"
)

// AuditEntry is one recorded state change.
type AuditEntry struct {
	ID     int64           `json:"id"`
	TeamID *int64          `json:"team_id,omitempty"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	At     time.Time       `json:"at"`
}

// Audit lists the newest entries, for one team or (teamID nil) all.
func (s *Store) Audit(ctx context.Context, teamID *int64, limit int32) ([]AuditEntry, error) {
	rows, err := s.q.AuditLogList(ctx, s.pool, db.AuditLogListParams{TeamID: teamID, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("store: list audit log: %w", err)
	}
	return auditEntries(rows), nil
}

// AuditPage lists up to limit of a team's entries older than beforeID (nil:
// the newest), newest first.
func (s *Store) AuditPage(ctx context.Context, teamID int64, beforeID *int64, limit int32) ([]AuditEntry, error) {
	rows, err := s.q.AuditLogPage(ctx, s.pool, db.AuditLogPageParams{TeamID: &teamID, BeforeID: beforeID, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("store: audit page: %w", err)
	}
	return auditEntries(rows), nil
}

func auditEntries(rows []db.AuditLog) []AuditEntry {
	entries := make([]AuditEntry, len(rows))
	for i, r := range rows {
		entries[i] = AuditEntry{ID: r.ID, TeamID: r.TeamID, Actor: r.Actor, Action: r.Action, Target: r.Target,
			Before: r.Before, After: r.After, At: r.At}
	}
	return entries
}
