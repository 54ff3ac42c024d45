// Package ledger writes the gateway's per-request ledger rows to Postgres off the
// hot path: requests queue entries in memory and a loop upserts them in batches.
//
// What a crash can lose is bounded: an entry waits at most one flush interval
// while Postgres answers. When Postgres does not answer, entries are kept and
// retried (an upsert makes a retry harmless) and, with a SpoolDir, appended to
// a local file that outlives the process (see spool), so a shutdown or crash
// during an outage loses none; the next start replays it. The writer reports
// unhealthy, so paid admissions fail closed instead of piling up spend nobody
// can account for, once the oldest unwritten entry is older than MaxLag, once
// MaxRows entries are unwritten, or while the spool cannot be written.
package ledger

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// Sink is where batches go; *store.Store is one.
type Sink interface {
	FlushLedger(ctx context.Context, entries []proxy.LedgerEntry) (store.LedgerFlush, error)
}

// Options tune the writer; zero values take the defaults noted.
type Options struct {
	Interval time.Duration // between flushes (default 200ms)
	MaxBatch int           // entries per upsert batch (default 1000)
	MaxLag   time.Duration // unwritten-entry age past which Healthy is false (default 30s)
	MaxRows  int           // unwritten entries at which Healthy is false (default 100000)
	// WriteTimeout bounds one flush's writes, so an unanswering Postgres
	// (packets dropped, not refused) still ends in the spool (default 5s).
	WriteTimeout time.Duration
	// SpoolDir keeps unwritten entries on disk; "" keeps them in memory only.
	SpoolDir string
	// Flushed is told what each batch written did (which rows it made final,
	// the teams' rebuild generations and watermarks), and called after every
	// flush that wrote everything, an empty one too, so it can retry its own
	// work. It runs on the flush loop.
	Flushed func(ctx context.Context, f store.LedgerFlush)
	Logger  *slog.Logger
	Now     func() time.Time
}

// Writer batches ledger entries; safe for concurrent use.
type Writer struct {
	sink Sink
	opts Options

	flushMu sync.Mutex // one Flush at a time: the spool is only touched there
	spool   *spool     // nil without a SpoolDir

	mu       sync.Mutex
	pending  map[entryKey]pending
	oldest   time.Time // when the oldest pending entry arrived; zero when none
	flushing int       // entries taken by the Flush under way
	spoolErr error     // the last failure to spool, until a write succeeds
}

// pending is an unwritten entry and whether this version of it is spooled.
type pending struct {
	proxy.LedgerEntry
	spooled bool
}

type entryKey struct {
	team      int64
	requestID string
}

// New returns a Writer; start its loop with Run and release its spool with
// Close. Entries a previous process left in SpoolDir are pending again.
func New(sink Sink, opts Options) (*Writer, error) {
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
	if opts.MaxRows == 0 {
		opts.MaxRows = 100000
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	w := &Writer{sink: sink, opts: opts, pending: map[entryKey]pending{}}
	if opts.SpoolDir == "" {
		return w, nil
	}
	s, left, err := openSpool(opts.SpoolDir)
	if err != nil {
		return nil, err
	}
	w.spool = s
	for _, e := range left {
		w.merge(pending{e, true})
	}
	if len(left) > 0 {
		w.oldest = opts.Now()
		opts.Logger.Info("ledger rows left by an earlier process will be written", "rows", len(w.pending), "dir", opts.SpoolDir)
	}
	return w, nil
}

// Close releases the spool, for the next process; what it holds unwritten
// stays for that one to replay. The Writer keeps entries in memory only after.
func (w *Writer) Close() {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	if w.spool != nil {
		w.spool.close()
		w.spool = nil
	}
}

// Record queues an entry. A later entry for the same request replaces an earlier
// one, except that a held entry never replaces a final one.
func (w *Writer) Record(e proxy.LedgerEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.merge(pending{LedgerEntry: e})
	if w.oldest.IsZero() {
		w.oldest = w.opts.Now()
	}
}

func (w *Writer) merge(e pending) {
	k := entryKey{e.TeamID, e.RequestID}
	if cur, ok := w.pending[k]; ok && cur.Status != proxy.LedgerHeld && e.Status == proxy.LedgerHeld {
		return
	}
	w.pending[k] = e
}

// Healthy reports whether entries are being made durable in time, and there
// is room for more.
func (w *Writer) Healthy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spoolErr == nil && len(w.pending)+w.flushing < w.opts.MaxRows &&
		(w.oldest.IsZero() || w.opts.Now().Sub(w.oldest) < w.opts.MaxLag)
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
		out = append(out, e.LedgerEntry)
	}
	return out
}

// Run flushes every Interval until ctx ends, then flushes what is left, trying
// for up to drain, or once when every entry left is spooled.
func (w *Writer) Run(ctx context.Context, drain time.Duration) {
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			for w.Flush(final) != nil && !w.allSpooled() && final.Err() == nil {
				time.Sleep(w.opts.Interval)
			}
			return
		case <-ticker.C:
			w.Flush(ctx)
		}
	}
}

func (w *Writer) allSpooled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.pending {
		if !e.spooled {
			return false
		}
	}
	return w.spool != nil
}

// Flush writes every pending entry. On failure the entries not spooled yet are
// spooled, all go back into the queue (entries recorded meanwhile win) and the
// error is returned.
func (w *Writer) Flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	batch, oldest := w.pending, w.oldest
	w.pending, w.oldest, w.flushing = map[entryKey]pending{}, time.Time{}, len(batch)
	w.mu.Unlock()
	if len(batch) == 0 {
		w.flushed(ctx, store.LedgerFlush{})
		return nil
	}
	entries := make([]pending, 0, len(batch))
	plain := make([]proxy.LedgerEntry, 0, len(batch))
	for _, e := range batch {
		entries = append(entries, e)
		plain = append(plain, e.LedgerEntry)
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	defer cancel()
	for start := 0; start < len(entries); start += w.opts.MaxBatch {
		chunk := plain[start:min(start+w.opts.MaxBatch, len(entries))]
		f, err := w.sink.FlushLedger(ctx, chunk)
		if err == nil {
			w.flushed(ctx, f)
		}
		if err != nil {
			spoolErr := w.spoolUnspooled(entries[start:])
			w.requeue(entries[start:], oldest, spoolErr)
			w.opts.Logger.Error("ledger rows not written yet; will retry", "rows", len(entries)-start, "spooled", spoolErr == nil && w.spool != nil, "err", err)
			if spoolErr != nil {
				w.opts.Logger.Error("ledger rows cannot be spooled either; paid requests are refused until they are written", "err", spoolErr)
			}
			return err
		}
	}
	var clearErr error
	if w.spool != nil {
		// Every spooled entry was in this batch: the pending ones all were.
		clearErr = w.spool.clear()
	}
	w.mu.Lock()
	w.flushing, w.spoolErr = 0, clearErr
	w.mu.Unlock()
	return nil
}

func (w *Writer) flushed(ctx context.Context, f store.LedgerFlush) {
	if w.opts.Flushed != nil {
		w.opts.Flushed(ctx, f)
	}
}

// spoolUnspooled appends the entries whose current version is not on disk yet,
// marking them spooled.
func (w *Writer) spoolUnspooled(entries []pending) error {
	if w.spool == nil {
		return nil
	}
	var todo []proxy.LedgerEntry
	for _, e := range entries {
		if !e.spooled {
			todo = append(todo, e.LedgerEntry)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if err := w.spool.append(todo); err != nil {
		return err
	}
	for i := range entries {
		entries[i].spooled = true
	}
	return nil
}

func (w *Writer) requeue(entries []pending, oldest time.Time, spoolErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	newer := w.pending
	w.pending = make(map[entryKey]pending, len(entries)+len(newer))
	for _, e := range entries {
		w.merge(e)
	}
	for _, e := range newer {
		w.merge(e)
	}
	if w.oldest.IsZero() || oldest.Before(w.oldest) {
		w.oldest = oldest
	}
	w.flushing, w.spoolErr = 0, spoolErr
}
