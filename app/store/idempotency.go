package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// IdempotencyWindow is how long the first response to an Idempotency-Key is
// replayed.
const IdempotencyWindow = 24 * time.Hour

// IdempotentResponse is the stored first response to a request.
type IdempotentResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// Claim outcomes besides a fresh claim.
var (
	// ErrIdempotencyMismatch: the key was used for a different request.
	ErrIdempotencyMismatch = errors.New("idempotency key reused for a different request")
	// ErrIdempotencyInFlight: the first request with the key is still being served.
	ErrIdempotencyInFlight = errors.New("a request with this idempotency key is still being served")
)

// ClaimIdempotencyKey claims key in scope for a request whose hash is
// requestHash. It returns (nil, nil) when the caller must serve the request
// and then FinishIdempotencyKey or ReleaseIdempotencyKey; the stored response
// when the same request was served before inside the window;
// ErrIdempotencyMismatch when the key was used for another request; and
// ErrIdempotencyInFlight while the first is still being served.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, scope, key string, requestHash []byte) (*IdempotentResponse, error) {
	// Expired keys are forgotten before claiming, so a key may be reused after
	// the window and the table holds at most a window of keys.
	if err := s.q.IdempotencyExpire(ctx, s.pool, time.Now().Add(-IdempotencyWindow)); err != nil {
		return nil, fmt.Errorf("store: expire idempotency keys: %w", err)
	}
	_, err := s.q.IdempotencyClaim(ctx, s.pool, db.IdempotencyClaimParams{Scope: scope, Key: key, RequestHash: requestHash})
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("store: claim idempotency key: %w", err)
	}
	row, err := s.q.IdempotencyGet(ctx, s.pool, db.IdempotencyGetParams{Scope: scope, Key: key})
	if err != nil {
		// Released between the claim and this read: the caller may retry.
		return nil, fmt.Errorf("store: idempotency key: %w", mapErr(err))
	}
	switch {
	case !bytes.Equal(row.RequestHash, requestHash):
		return nil, ErrIdempotencyMismatch
	case row.Status == nil:
		return nil, ErrIdempotencyInFlight
	}
	return &IdempotentResponse{Status: int(*row.Status), ContentType: row.ContentType, Body: row.Body}, nil
}

// FinishIdempotencyKey stores the response to replay for a claimed key.
func (s *Store) FinishIdempotencyKey(ctx context.Context, scope, key string, resp IdempotentResponse) error {
	status := int32(resp.Status)
	if err := s.q.IdempotencyFinish(ctx, s.pool, db.IdempotencyFinishParams{Scope: scope, Key: key, Status: &status,
		ContentType: resp.ContentType, Body: resp.Body}); err != nil {
		return fmt.Errorf("store: finish idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey frees a claimed key whose request failed on the
// server's side, so that a retry is served again rather than replayed.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key string) error {
	if err := s.q.IdempotencyRelease(ctx, s.pool, db.IdempotencyReleaseParams{Scope: scope, Key: key}); err != nil {
		return fmt.Errorf("store: release idempotency key: %w", err)
	}
	return nil
}
