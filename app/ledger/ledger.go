// Package ledger writes the gateway's per-request ledger rows to Postgres off the
// hot path: requests queue entries in memory and a loop upserts them in batches.
//
// What a crash can lose is bounded: an entry waits at most one flush interval
// while Postgres answers. When Postgres does not answer, entries are kept and
// retried (an upsert makes a retry harmless), and once the oldest unwritten entry
// is older than MaxLag the writer reports unhealthy so paid admissions fail
// closed instead of piling up spend nobody can account for.
package ledger

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/proxy"
)

// Sink is where batches go; *store.Store is one.
type Sink interface {
	WriteLedger(ctx context.Context, entries []proxy.LedgerEntry) error
}

// Options tune the writer; zero values take the defaults noted.
type Options struct {
	Interval time.Duration // between flushes (default 200ms)
	MaxBatch int           // entries per upsert batch (default 1000)
	MaxLag   time.Duration // unwritten-entry age past which Healthy is false (default 30s)
	Logger   *slog.Logger
	Now      func() time.Time
}

// Writer batches ledger entries; safe for concurrent use.
type Writer struct {
	sink Sink
	opts Options

	mu      sync.Mutex
	pending map[entryKey]proxy.LedgerEntry
	oldest  time.Time // when the oldest pending entry arrived; zero when none
}

type entryKey struct {
	team      int64
	requestID string
}

// New returns a Writer; start its loop with Run.
func New(sink Sink, opts Options) *Writer {
	if opts.Interval == 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 1000
	}
	if opts.MaxLag == 0 {
		opts.MaxLag = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Writer{sink: sink, opts: opts, pending: map[entryKey]proxy.LedgerEntry{}}
}

// Record queues an entry. A later entry for the same request replaces an earlier
// one, except that a held entry never replaces a final one.
func (w *Writer) Record(e proxy.LedgerEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.merge(e)
	if w.oldest.IsZero() {
		w.oldest = w.opts.Now()
	}
}

func (w *Writer) merge(e proxy.LedgerEntry) {
	k := entryKey{e.TeamID, e.RequestID}
	if cur, ok := w.pending[k]; ok && cur.Status != proxy.LedgerHeld && e.Status == proxy.LedgerHeld {
		return
	}
	w.pending[k] = e
}

// Healthy reports whether entries are being made durable in time.
func (w *Writer) Healthy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oldest.IsZero() || w.opts.Now().Sub(w.oldest) < w.opts.MaxLag
}

// Backlog is how many entries wait to be written and how long the oldest has
// waited, for the metrics; zero when none wait.
func (w *Writer) Backlog() (rows int, age time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.oldest.IsZero() {
		return len(w.pending), 0
	}
	return len(w.pending), w.opts.Now().Sub(w.oldest)
}

// Pending returns a copy of the entries not yet written, so a rebuild of the
// admission counters can count what this replica has not flushed.
func (w *Writer) Pending() []proxy.LedgerEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]proxy.LedgerEntry, 0, len(w.pending))
	for _, e := range w.pending {
		out = append(out, e)
	}
	return out
}

// Run flushes every Interval until ctx ends, then flushes what is left, trying
// for up to drain.
func (w *Writer) Run(ctx context.Context, drain time.Duration) {
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			for w.Flush(final) != nil && final.Err() == nil {
				time.Sleep(w.opts.Interval)
			}
			return
		case <-ticker.C:
			w.Flush(ctx)
		}
	}
}

// Flush writes every pending entry. On failure the entries go back into the
// queue (entries recorded meanwhile win) and the error is returned.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	batch, oldest := w.pending, w.oldest
	w.pending, w.oldest = map[entryKey]proxy.LedgerEntry{}, time.Time{}
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	entries := make([]proxy.LedgerEntry, 0, len(batch))
	for _, e := range batch {
		entries = append(entries, e)
	}
	for start := 0; start < len(entries); start += w.opts.MaxBatch {
		chunk := entries[start:min(start+w.opts.MaxBatch, len(entries))]
		if err := w.sink.WriteLedger(ctx, chunk); err != nil {
			w.requeue(entries[start:], oldest)
			w.opts.Logger.Error("ledger rows not written yet; will retry", "rows", len(entries)-start, "err", err)
			return err
		}
	}
	return nil
}

func (w *Writer) requeue(entries []proxy.LedgerEntry, oldest time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	newer := w.pending
	w.pending = make(map[entryKey]proxy.LedgerEntry, len(entries)+len(newer))
	for _, e := range entries {
		w.merge(e)
	}
	for _, e := range newer {
		w.merge(e)
	}
	if w.oldest.IsZero() || oldest.Before(w.oldest) {
		w.oldest = oldest
	}
}
