// Package store is every durable write and read of teams, members, keys and
// routes. The CLI and the console call these same functions, so they cannot
// drift; each write records an audit row in the same transaction.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/db"
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

// Actor names who makes a change, for the audit log: "cli" or "member:<id>".
type Actor string

// ActorCLI is the operator at the command line.
const ActorCLI Actor = "cli"

// Store reads and writes the durable config.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: db.New()}
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
