package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/proxy/apikey"
)

// Admin token roles: an owner token makes every change an owner can, a read
// token only reads.
const (
	TokenRoleOwner = "owner"
	TokenRoleRead  = "read"
)

// MaxTokenLifetime bounds an admin token's expiry: a forgotten token in a CI
// secret store stops working within a year.
const MaxTokenLifetime = 366 * 24 * time.Hour

// TokenLifetimeDays is a token's lifetime given in whole days, as the console
// takes it, checked before it becomes a Duration: an unchecked count times 24h
// wraps past 2^63 ns into a lifetime nobody chose.
func TokenLifetimeDays(days int64) (time.Duration, error) {
	if maxDays := int64(MaxTokenLifetime / (24 * time.Hour)); days < 1 || days > maxDays {
		return 0, invalid("expires", "a token must expire in 1 to %d days, not %d", maxDays, days)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

// Who a token belongs to. A person's token works only while they are an
// active owner of its team; the deployment's (made by the operator's CLI)
// while it lives. An unattributed token predates owners being recorded and
// could not be tied to anyone: it was revoked when they began to be.
const (
	OwnerMember       = "member"
	OwnerDeployment   = "deployment"
	OwnerUnattributed = "unattributed"
)

// AdminToken is an admin token's metadata; the plaintext exists only in
// IssuedAdminToken, once. TeamID nil is a deployment-level token.
type AdminToken struct {
	ID         string     `json:"id"`
	TeamID     *int64     `json:"team_id,omitempty"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// CreatedBy is the actor that made the token, as the audit log names it.
	CreatedBy string `json:"created_by"`
	// Owner is OwnerMember (MemberID, OwnerEmail say who), OwnerDeployment or
	// OwnerUnattributed.
	Owner      string `json:"owner" enum:"member,deployment,unattributed"`
	MemberID   *int64 `json:"member_id,omitempty"`
	OwnerEmail string `json:"owner_email,omitempty"`
}

// Deployment reports whether t belongs to the deployment rather than a team.
func (t AdminToken) Deployment() bool { return t.TeamID == nil }

// Actor is the audit actor for changes made with t: its id and its name, so
// the audit log says which script or pipeline made a change.
func (t AdminToken) Actor() Actor { return Actor("token:" + t.ID + ":" + t.Name) }

// State is active, expired or revoked.
func (t AdminToken) State(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case !now.Before(t.ExpiresAt):
		return "expired"
	}
	return "active"
}

// IssuedAdminToken is a new token with its plaintext, to be shown exactly once.
type IssuedAdminToken struct {
	AdminToken
	Plaintext string `json:"plaintext"`
}

// AdminTokenSpec is what the creator of a token chooses.
type AdminTokenSpec struct {
	TeamID   *int64 // nil: a deployment-level token
	Name     string
	Role     string
	Lifetime time.Duration
}

func adminTokenFrom(r db.AdminToken, ownerEmail *string) AdminToken {
	t := AdminToken{ID: r.ID, TeamID: r.TeamID, Name: r.Name, Role: r.Role, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt, CreatedBy: r.CreatedBy, Owner: r.OwnerKind, MemberID: r.MemberID}
	if ownerEmail != nil {
		t.OwnerEmail = *ownerEmail
	}
	return t
}

// tokenOwner is who a token made by actor for team belongs to: the person
// acting (through a session or a token of theirs), who must be an active
// owner of that team, or the deployment for the operator's CLI and the
// tokens it made.
func (s *Store) tokenOwner(ctx context.Context, tx pgx.Tx, actor Actor, teamID *int64) (kind string, memberID *int64, err error) {
	person, isPerson, err := s.person(ctx, tx, actor)
	if err != nil || !isPerson {
		return OwnerDeployment, nil, err
	}
	if teamID == nil {
		return "", nil, forbidden("a deployment token is the operator's: tollgate admin token create --deployment")
	}
	m, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: *teamID, ID: person})
	if err != nil || m.Role != RoleOwner || m.Status != StatusActive {
		return "", nil, forbidden("only an active owner of the team can make its admin tokens")
	}
	return OwnerMember, &m.ID, nil
}

// CreateAdminToken issues an admin token.
func (s *Store) CreateAdminToken(ctx context.Context, actor Actor, spec AdminTokenSpec) (IssuedAdminToken, error) {
	if err := checkText("name", "token name", spec.Name); err != nil {
		return IssuedAdminToken{}, err
	}
	if spec.Name == "" || len(spec.Name) > 100 {
		return IssuedAdminToken{}, invalid("name", "token name must be 1 to 100 characters")
	}
	if spec.Role != TokenRoleOwner && spec.Role != TokenRoleRead {
		return IssuedAdminToken{}, invalid("role", "token role must be owner or read, not %q", spec.Role)
	}
	if spec.Lifetime <= 0 || spec.Lifetime > MaxTokenLifetime {
		return IssuedAdminToken{}, invalid("expires", "a token must expire within %s, not after %s", MaxTokenLifetime, spec.Lifetime)
	}
	g := apikey.Admin.Generate()
	var issued IssuedAdminToken
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		kind, memberID, err := s.tokenOwner(ctx, tx, actor, spec.TeamID)
		if err != nil {
			return err
		}
		row, err := s.q.AdminTokenCreate(ctx, tx, db.AdminTokenCreateParams{ID: g.ID, TeamID: spec.TeamID, Name: spec.Name,
			Role: spec.Role, SecretHash: g.SecretHash[:], ExpiresAt: time.Now().Add(spec.Lifetime), CreatedBy: string(actor),
			OwnerKind: kind, MemberID: memberID})
		if err != nil {
			return mapErr(err)
		}
		t := adminTokenFrom(row, nil)
		issued = IssuedAdminToken{AdminToken: t, Plaintext: g.Plaintext}
		return s.audit(ctx, tx, actor, auditEntry{teamID: spec.TeamID, action: ActionAdminTokenCreate, target: t.ID, after: t})
	})
	if err != nil {
		return IssuedAdminToken{}, fmt.Errorf("store: create admin token %q: %w", spec.Name, err)
	}
	return issued, nil
}

// AdminTokens lists a team's tokens, or (teamID nil) the deployment's.
func (s *Store) AdminTokens(ctx context.Context, teamID *int64) ([]AdminToken, error) {
	rows, err := s.q.AdminTokenList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list admin tokens: %w", err)
	}
	tokens := make([]AdminToken, len(rows))
	for i, r := range rows {
		tokens[i] = adminTokenFrom(r.AdminToken, r.OwnerEmail)
	}
	return tokens, nil
}

// FindAdminToken returns a token by its globally unique id; for the
// operator's CLI, which names tokens without a team.
func (s *Store) FindAdminToken(ctx context.Context, id string) (AdminToken, error) {
	row, err := s.q.AdminTokenGetWithOwner(ctx, s.pool, id)
	if err != nil {
		return AdminToken{}, fmt.Errorf("store: admin token %s: %w", id, mapErr(err))
	}
	return adminTokenFrom(row.AdminToken, row.OwnerEmail), nil
}

// RevokeAdminToken stops a token of a team (or, teamID nil, of the
// deployment) at once.
func (s *Store) RevokeAdminToken(ctx context.Context, actor Actor, teamID *int64, id string) (AdminToken, error) {
	var t AdminToken
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.AdminTokenRevoke(ctx, tx, db.AdminTokenRevokeParams{ID: id, TeamID: teamID})
		if errors.Is(err, pgx.ErrNoRows) {
			// Either no such token here, or revoked already: tell them apart.
			existing, getErr := s.q.AdminTokenGet(ctx, tx, id)
			if getErr == nil && existing.RevokedAt != nil && equalTeam(existing.TeamID, teamID) {
				return stale("admin token %s is already revoked", id)
			}
			return ErrNotFound
		}
		if err != nil {
			return mapErr(err)
		}
		t = adminTokenFrom(row, nil)
		return s.audit(ctx, tx, actor, auditEntry{teamID: teamID, action: ActionAdminTokenRevoke, target: id, after: t})
	})
	if err != nil {
		return AdminToken{}, fmt.Errorf("store: revoke admin token %s: %w", id, err)
	}
	return t, nil
}

func equalTeam(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TokenError is a refused admin token. Fault says why, for the operator's
// security event only: the caller is told the same for every fault, so a
// prober learns nothing about which ids exist.
type TokenError struct{ Fault string }

func (e *TokenError) Error() string { return "admin token refused: " + e.Fault }

// A fixed hash to compare against when the token id is unknown, so unknown
// ids cost the same time as wrong secrets.
var decoyTokenHash [32]byte

// AuthenticateAdminToken returns the live token whose plaintext this is, and
// records its use. A malformed, unknown, wrong, revoked or expired token is a
// *TokenError, and so is a person's token while that person is not an active
// owner of its team: read here on every call, so a cut-off or demotion stops
// the token at its next request on every replica.
func (s *Store) AuthenticateAdminToken(ctx context.Context, plaintext string) (AdminToken, error) {
	id, secret, ok := apikey.Admin.Parse(plaintext)
	if !ok {
		return AdminToken{}, &TokenError{Fault: "malformed"}
	}
	owned, err := s.q.AdminTokenGetWithOwner(ctx, s.pool, id)
	row := owned.AdminToken
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return AdminToken{}, fmt.Errorf("store: admin token: %w", err)
	}
	want := decoyTokenHash
	if found {
		copy(want[:], row.SecretHash)
	}
	switch matches := apikey.Matches(secret, want); {
	case !found:
		return AdminToken{}, &TokenError{Fault: "unknown_id"}
	case !matches:
		return AdminToken{}, &TokenError{Fault: "wrong_secret"}
	}
	t := adminTokenFrom(row, owned.OwnerEmail)
	switch t.State(time.Now()) {
	case "revoked":
		return t, &TokenError{Fault: "revoked"}
	case "expired":
		return t, &TokenError{Fault: "expired"}
	}
	switch {
	case t.Owner == OwnerDeployment:
	case t.Owner != OwnerMember || owned.OwnerStatus == nil:
		return t, &TokenError{Fault: "unattributed"}
	case *owned.OwnerStatus != StatusActive:
		return t, &TokenError{Fault: "owner_cut_off"}
	case *owned.OwnerRole != RoleOwner:
		return t, &TokenError{Fault: "owner_not_owner"}
	}
	if err := s.q.AdminTokenTouch(ctx, s.pool, id); err != nil {
		s.log.Warn("admin token use not recorded", "token_id", id, "err", err)
	}
	return t, nil
}
