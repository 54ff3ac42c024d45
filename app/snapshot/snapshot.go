// Package snapshot keeps every replica's in-memory config current: it loads a
// proxy.Snapshot from Postgres and swaps in a new one whenever a trigger NOTIFYs
// a change, with a periodic poll as the backstop for a dropped listener.
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/proxy"
)

// Loader reads a complete snapshot; *store.Store is one.
type Loader interface {
	Snapshot(ctx context.Context, log *slog.Logger) (*proxy.Snapshot, error)
}

// Source holds the current snapshot and keeps it fresh.
type Source struct {
	loader  Loader
	pool    *pgxpool.Pool
	poll    time.Duration
	log     *slog.Logger
	current atomic.Pointer[proxy.Snapshot]
	reloads atomic.Int64

	// Loads overlap (a notification's and a change's own, which must be seen
	// when its answer leaves): one started later read newer rows, so an
	// earlier one that ends after it must not swap its older snapshot in.
	started atomic.Int64
	mu      sync.Mutex
	stored  int64 // the start number of the snapshot in current
}

// Channel is the NOTIFY channel the migrations' triggers signal on.
const Channel = "tollgate_config"

// New loads the first snapshot, so a gateway never serves without config.
func New(ctx context.Context, loader Loader, pool *pgxpool.Pool, poll time.Duration, log *slog.Logger) (*Source, error) {
	s := &Source{loader: loader, pool: pool, poll: poll, log: log}
	if err := s.Reload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Current returns the snapshot in force; callers never see a partial one.
func (s *Source) Current() *proxy.Snapshot { return s.current.Load() }

// Reloads counts completed reloads (the first load included).
func (s *Source) Reloads() int64 { return s.reloads.Load() }

// Reload reads a new snapshot and swaps it in.
func (s *Source) Reload(ctx context.Context) error {
	n := s.started.Add(1)
	snap, err := s.loader.Snapshot(ctx, s.log)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if n > s.stored {
		s.current.Store(snap)
		s.stored = n
	}
	s.mu.Unlock()
	s.reloads.Add(1)
	return nil
}

// Run keeps the snapshot fresh until ctx ends: it LISTENs for change
// notifications (reconnecting after a failure) and polls as a backstop.
func (s *Source) Run(ctx context.Context) {
	notified := make(chan struct{}, 1)
	go s.listen(ctx, notified)
	ticker := time.NewTicker(s.poll)
	defer ticker.Stop()
	// Budget grants belong to one period: reload as a day (and so a month)
	// begins, so a grant stops counting then rather than at the next poll.
	boundary := time.NewTimer(UntilNextPeriod(time.Now()))
	defer boundary.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-notified:
		case <-boundary.C:
			boundary.Reset(UntilNextPeriod(time.Now()))
		}
		if err := s.Reload(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("config reload failed; keeping the previous snapshot", "err", err)
		}
	}
}

func (s *Source) listen(ctx context.Context, notified chan<- struct{}) {
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, notified)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("config listener lost; retrying (the poll still reloads meanwhile)", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Source) listenOnce(ctx context.Context, notified chan<- struct{}) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// The connection will carry LISTEN state; it never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	// Named so an operator (or a test) can tell this connection apart in pg_stat_activity.
	if _, err := conn.Exec(ctx, "SELECT set_config('application_name', $1, false)", "tollgate-listen:"+schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	// A change made while the listener was down would be missed otherwise.
	signal(notified)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == schema {
			signal(notified)
		}
	}
}

// periodSlack is how long after UTC midnight the boundary reload runs, so
// that Postgres's clock, a little behind this one, is past midnight too.
const periodSlack = 50 * time.Millisecond

// UntilNextPeriod is how long from now until the reload for the next budget
// period (daily and monthly periods both begin at a UTC midnight).
func UntilNextPeriod(now time.Time) time.Duration {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Add(periodSlack)
	if d := next.Sub(now); d > 24*time.Hour {
		return d - 24*time.Hour // within the slack after midnight: this day's reload is still due
	}
	return next.Sub(now)
}

// signal never blocks: one pending reload covers any number of notifications.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
