package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/proxy/apikey"
)

// Key is a member key's metadata; the plaintext exists only in IssuedKey, once.
type Key struct {
	ID         string     `json:"id"`
	TeamID     int64      `json:"team_id"`
	MemberID   int64      `json:"member_id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	ReplacedBy *string    `json:"replaced_by,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// State is active, grace (rotated, still working until ExpiresAt), expired or revoked.
func (k Key) State(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	case k.ExpiresAt != nil:
		return "grace"
	}
	return "active"
}

// IssuedKey is a new key with its plaintext, to be shown exactly once.
type IssuedKey struct {
	Key
	Plaintext string `json:"plaintext"`
}

func keyFrom(k db.ApiKey) Key {
	return Key{ID: k.ID, TeamID: k.TeamID, MemberID: k.MemberID, Name: k.Name, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, ReplacedBy: k.ReplacedBy, RevokedAt: k.RevokedAt}
}

// IssueKey creates a key for an active member.
func (s *Store) IssueKey(ctx context.Context, actor Actor, teamID, memberID int64, name string) (IssuedKey, error) {
	if err := checkText("name", "key name", name); err != nil {
		return IssuedKey{}, err
	}
	if len(name) > 100 {
		return IssuedKey{}, invalid("name", "key name must be at most 100 characters")
	}
	var issued IssuedKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		issued, err = s.issueKey(ctx, tx, actor, teamID, memberID, name)
		return err
	})
	if err != nil {
		return IssuedKey{}, fmt.Errorf("store: issue key: %w", err)
	}
	return issued, nil
}

func (s *Store) issueKey(ctx context.Context, tx pgx.Tx, actor Actor, teamID, memberID int64, name string) (IssuedKey, error) {
	m, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: teamID, ID: memberID})
	if err != nil {
		return IssuedKey{}, mapErr(err)
	}
	if m.Status != StatusActive {
		return IssuedKey{}, invalid("member", "member %s is disabled; enable them before issuing a key", m.Email)
	}
	g := apikey.Generate()
	row, err := s.q.APIKeyCreate(ctx, tx, db.APIKeyCreateParams{ID: g.ID, TeamID: teamID, MemberID: memberID, Name: name, SecretHash: g.SecretHash[:]})
	if err != nil {
		return IssuedKey{}, mapErr(err)
	}
	k := keyFrom(row)
	if err := s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionKeyIssue, target: k.ID, after: k}); err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{Key: k, Plaintext: g.Plaintext}, nil
}

// RotateKey issues a replacement for a key; the old key keeps working for grace
// (with a deprecation header) and is refused after it. A grace of zero revokes the
// old key at once. A key already rotated cannot be rotated again: rotate its
// replacement instead.
func (s *Store) RotateKey(ctx context.Context, actor Actor, teamID int64, keyID string, grace time.Duration) (IssuedKey, error) {
	if grace < 0 {
		return IssuedKey{}, invalid("grace", "grace must not be negative")
	}
	var issued IssuedKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		old, err := s.lockKey(ctx, tx, teamID, keyID)
		if err != nil {
			return err
		}
		if old.RevokedAt != nil {
			return stale("key %s is revoked", keyID)
		}
		if old.ReplacedBy != nil {
			return stale("key %s was already rotated to %s; rotate that one", keyID, *old.ReplacedBy)
		}
		issued, err = s.issueKey(ctx, tx, actor, teamID, old.MemberID, old.Name)
		if err != nil {
			return err
		}
		expired, err := s.q.APIKeyExpire(ctx, tx, db.APIKeyExpireParams{TeamID: teamID, ID: keyID,
			ExpiresAt: time.Now().Add(grace), ReplacedBy: &issued.ID})
		if err != nil {
			return mapErr(err)
		}
		if grace == 0 {
			if _, err = s.q.APIKeyRevoke(ctx, tx, db.APIKeyRevokeParams{TeamID: teamID, ID: keyID}); err != nil {
				return mapErr(err)
			}
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionKeyRotate, target: keyID,
			before: keyFrom(old), after: map[string]any{"replaced_by": issued.ID, "expires_at": expired.ExpiresAt}})
	})
	if err != nil {
		return IssuedKey{}, fmt.Errorf("store: rotate key %s: %w", keyID, err)
	}
	if grace == 0 {
		s.mirrorKeyRevoked(ctx, teamID, keyID)
	}
	return issued, nil
}

// lockKey reads a key under a row lock for a change that depends on its
// state: of two concurrent rotations or revocations, the second waits for the
// first to commit and then sees what it did, so exactly one wins.
func (s *Store) lockKey(ctx context.Context, tx pgx.Tx, teamID int64, keyID string) (db.ApiKey, error) {
	k, err := s.q.APIKeyLock(ctx, tx, db.APIKeyLockParams{TeamID: teamID, ID: keyID})
	return k, mapErr(err)
}

// RevokeKey stops a key at once.
func (s *Store) RevokeKey(ctx context.Context, actor Actor, teamID int64, keyID string) (Key, error) {
	var k Key
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		old, err := s.lockKey(ctx, tx, teamID, keyID)
		if err != nil {
			return err
		}
		if old.RevokedAt != nil {
			return stale("key %s is already revoked", keyID)
		}
		row, err := s.q.APIKeyRevoke(ctx, tx, db.APIKeyRevokeParams{TeamID: teamID, ID: keyID})
		if err != nil {
			return mapErr(err)
		}
		k = keyFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionKeyRevoke, target: keyID, after: k})
	})
	if err != nil {
		return Key{}, fmt.Errorf("store: revoke key %s: %w", keyID, err)
	}
	s.mirrorKeyRevoked(ctx, teamID, keyID)
	return k, nil
}

// KeyTeam finds which team a key id belongs to; for the operator's CLI, which
// names keys without a team.
func (s *Store) KeyTeam(ctx context.Context, keyID string) (int64, error) {
	row, err := s.q.APIKeyFind(ctx, s.pool, keyID)
	if err != nil {
		return 0, fmt.Errorf("store: key %s: %w", keyID, mapErr(err))
	}
	return row.TeamID, nil
}

// Keys lists a team's keys.
func (s *Store) Keys(ctx context.Context, teamID int64) ([]Key, error) {
	rows, err := s.q.APIKeyListByTeam(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	keys := make([]Key, len(rows))
	for i, r := range rows {
		keys[i] = keyFrom(r)
	}
	return keys, nil
}
