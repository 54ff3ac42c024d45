// Package store is every durable write and read of teams, members, keys and
// routes. The CLI and the console call these same functions, so they cannot
// drift; each write records an audit row in the same transaction.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// ErrNotFound means the row does not exist or belongs to another team.
var ErrNotFound = errors.New("not found")

// ErrConflict means the row already exists.
var ErrConflict = errors.New("already exists")

// ValidationError is a bad input, named by field, that the caller can show as is.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// StateError means the thing is no longer in the state the change needs: a key
// already rotated or revoked, a member who already set a password, most often
// by a concurrent call that won. Message says what happened; the console
// answers 409 with it, the CLI prints it.
type StateError struct{ Message string }

func (e *StateError) Error() string { return e.Message }

func stale(format string, args ...any) error {
	return &StateError{Message: fmt.Sprintf(format, args...)}
}

// ForbiddenError means the actor may not make this change whatever the data:
// deciding their own request or role, restoring themselves. The console and
// the API answer 403 with Message.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

func forbidden(format string, args ...any) error {
	return &ForbiddenError{Message: fmt.Sprintf(format, args...)}
}

// Actor names who makes a change, for the audit log: "cli" or "member:<id>".
type Actor string

// ActorCLI is the operator at the command line.
const ActorCLI Actor = "cli"

// Store reads and writes the durable config.
type Store struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	mirror Mirror
	log    *slog.Logger
	grants grant.Table
	// outbound checks the endpoints owners save (route upstreams, issuers).
	outbound *netguard.Guard
}

// Mirror is told of every revocation and cut-off right after it commits, so the
// admission call refuses it on every replica at the next request instead of after
// a snapshot reload. limiter.Limiter is one.
type Mirror interface {
	SetKeyRevoked(ctx context.Context, team, keyID string, revoked bool) error
	SetMemberCutOff(ctx context.Context, team, member string, cutOff bool) error
}

// New returns a Store on pool.
//
// Until WithOutbound, saved endpoints are checked by a guard with no
// allow-list: loopback and private upstreams are refused.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: db.New(), log: slog.New(slog.DiscardHandler), outbound: netguard.New(netguard.Options{}),
		grants: grant.Default()}
}

// WithOutbound returns a Store that checks the endpoints owners save (route
// upstreams and targets, OIDC issuers) with g, the guard the gateway dials through.
func (s *Store) WithOutbound(g *netguard.Guard) *Store {
	c := *s
	c.outbound = g
	return &c
}

// WithGrants returns a Store that holds routes to the deployment's credential
// grants t (the presets alone until it is called): writers refuse a route
// that breaks them, and snapshots disable a stored one that does.
func (s *Store) WithGrants(t grant.Table) *Store {
	c := *s
	c.grants = t
	return &c
}

// Grants is the table routes are held to.
func (s *Store) Grants() grant.Table { return s.grants }

// WithMirror returns a Store that mirrors revocations and cut-offs to m. A
// failed mirror write is logged, not returned: the change is already durable and
// every replica's snapshot enforces it within milliseconds anyway.
func (s *Store) WithMirror(m Mirror, log *slog.Logger) *Store {
	c := *s
	c.mirror, c.log = m, log
	return &c
}

func (s *Store) mirrorKeyRevoked(ctx context.Context, teamID int64, keyID string) {
	if s.mirror == nil {
		return
	}
	if err := s.mirror.SetKeyRevoked(ctx, strconv.FormatInt(teamID, 10), keyID, true); err != nil {
		s.log.Warn("revocation not mirrored to the admission store; snapshots still enforce it", "key_id", keyID, "err", err)
	}
}

func (s *Store) mirrorCutOff(ctx context.Context, teamID, memberID int64, cutOff bool) {
	if s.mirror == nil {
		return
	}
	if err := s.mirror.SetMemberCutOff(ctx, strconv.FormatInt(teamID, 10), strconv.FormatInt(memberID, 10), cutOff); err != nil {
		s.log.Warn("cut-off not mirrored to the admission store; snapshots still enforce it", "member_id", memberID, "err", err)
	}
}

// inTx runs fn in a transaction: every write and its audit row commit together.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

type auditEntry struct {
	teamID        *int64
	action        string
	target        string
	before, after any
}

func (s *Store) audit(ctx context.Context, tx pgx.Tx, actor Actor, e auditEntry) error {
	params := db.AuditLogInsertParams{TeamID: e.teamID, Actor: string(actor), Action: e.action, Target: e.target}
	if e.before != nil {
		params.Before, _ = json.Marshal(e.before)
	}
	if e.after != nil {
		params.After, _ = json.Marshal(e.after)
	}
	return s.q.AuditLogInsert(ctx, tx, params)
}

// mapErr turns driver errors into the store's own.
func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return ErrConflict
	}
	return err
}
