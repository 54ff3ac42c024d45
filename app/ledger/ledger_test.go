package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

type fixture struct {
	st     *store.Store
	teamID int64
	member int64
	keyID  string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	st := store.New(dbtest.Pool(t, dbtest.Schema(t)))
	team, err := st.CreateTeam(ctx, store.ActorCLI, "acme")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.AddMember(ctx, store.ActorCLI, team.ID, "ada@acme.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	k, err := st.IssueKey(ctx, store.ActorCLI, team.ID, m.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return fixture{st: st, teamID: team.ID, member: m.ID, keyID: k.ID}
}

func (f fixture) entry(id string, status proxy.LedgerStatus, cost int64) proxy.LedgerEntry {
	e := proxy.LedgerEntry{TeamID: f.teamID, MemberID: f.member, KeyID: f.keyID, RequestID: id, Model: "claude-sonnet-4-5",
		Status: status, HeldMicros: 5000, CostMicros: cost, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if status != proxy.LedgerHeld {
		e.SettledAt = e.CreatedAt.Add(time.Second)
		e.HTTPStatus = 200
		e.Usage = usage.Usage{InputTokens: 10, OutputTokens: 20}
	}
	return e
}

func (f fixture) rows(t *testing.T) map[string]proxy.LedgerEntry {
	t.Helper()
	entries, err := f.st.Ledger(context.Background(), f.teamID, nil, time.Time{}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]proxy.LedgerEntry{}
	for _, e := range entries {
		out[e.RequestID] = e
	}
	return out
}

// TestHeldThenSettled: whatever order entries are flushed in, a request ends
// with one row in its final state.
func TestHeldThenSettled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newWriter(t, f.st, ledger.Options{})
	ctx := context.Background()

	w.Record(f.entry("a", proxy.LedgerHeld, 0))
	w.Record(f.entry("a", proxy.LedgerSettled, 1234)) // same batch: settled wins
	w.Record(f.entry("b", proxy.LedgerSettled, 77))
	w.Record(f.entry("b", proxy.LedgerHeld, 0)) // late held in the same batch is ignored
	must(t, w.Flush(ctx))
	w.Record(f.entry("c", proxy.LedgerUncertain, 5000))
	must(t, w.Flush(ctx))
	w.Record(f.entry("c", proxy.LedgerHeld, 0)) // late held in a later batch does not revert
	must(t, w.Flush(ctx))

	rows := f.rows(t)
	want := map[string]struct {
		status proxy.LedgerStatus
		cost   int64
	}{"a": {proxy.LedgerSettled, 1234}, "b": {proxy.LedgerSettled, 77}, "c": {proxy.LedgerUncertain, 5000}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for id, w := range want {
		if r := rows[id]; r.Status != w.status || r.CostMicros != w.cost || r.HeldMicros != 5000 {
			t.Errorf("row %s = %s/%d held %d, want %s/%d", id, r.Status, r.CostMicros, r.HeldMicros, w.status, w.cost)
		}
	}
	if r := rows["a"]; r.Usage.OutputTokens != 20 || r.HTTPStatus != 200 || r.SettledAt.IsZero() {
		t.Errorf("settled row lost its detail: %+v", r)
	}
}

// flaky fails its first n writes, as a Postgres outage would.
type flaky struct {
	sink  ledger.Sink
	fails atomic.Int64
}

func (s *flaky) FlushLedger(ctx context.Context, e []proxy.LedgerEntry) (store.LedgerFlush, error) {
	if s.fails.Add(-1) >= 0 {
		return store.LedgerFlush{}, errors.New("connection refused")
	}
	return s.sink.FlushLedger(ctx, e)
}

// TestPostgresOutage: writes that fail are kept and retried; after MaxLag the
// writer reports unhealthy; after recovery every row is there exactly once.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sink := &flaky{sink: f.st}
	sink.fails.Store(3)
	now := time.Now()
	clock := func() time.Time { return now }
	w := newWriter(t, sink, ledger.Options{MaxLag: 10 * time.Second, Now: clock, MaxBatch: 7})
	ctx := context.Background()
	for i := range 50 {
		w.Record(f.entry(string(rune('a'+i%26))+string(rune('a'+i/26)), proxy.LedgerSettled, int64(i)))
	}
	for range 3 {
		if err := w.Flush(ctx); err == nil {
			t.Fatal("flush during the outage reported success")
		}
	}
	if !w.Healthy() {
		t.Fatal("unhealthy before MaxLag")
	}
	now = now.Add(11 * time.Second)
	if w.Healthy() {
		t.Fatal("still healthy with rows unwritten for longer than MaxLag")
	}
	must(t, w.Flush(ctx))
	if !w.Healthy() || len(w.Pending()) != 0 {
		t.Fatal("not healthy after the backlog was written")
	}
	if n := len(f.rows(t)); n != 50 {
		t.Fatalf("%d rows after recovery, want 50", n)
	}
}

// TestRunDrainsOnShutdown: entries recorded before shutdown are written by the
// final flush; the most a crash (no final flush) can lose is what arrived since
// the last tick.
func TestRunDrainsOnShutdown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newWriter(t, f.st, ledger.Options{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, 5*time.Second); close(done) }()
	for i := range 20 {
		w.Record(f.entry(string(rune('a'+i)), proxy.LedgerSettled, 1))
	}
	if len(w.Pending()) != 20 {
		t.Fatalf("pending %d, want 20 before any tick", len(w.Pending()))
	}
	cancel()
	<-done
	if n := len(f.rows(t)); n != 20 {
		t.Fatalf("%d rows after shutdown, want 20", n)
	}
}

func newWriter(t *testing.T, sink ledger.Sink, opts ledger.Options) *ledger.Writer {
	t.Helper()
	w, err := ledger.New(sink, opts)
	must(t, err)
	t.Cleanup(w.Close)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSpoolReplaysAfterRestart: rows Postgres did not take are in the spool
// when the writer stops; the next writer on the directory writes them, and a
// second replay of the same file (and its torn last line) changes nothing: a
// held row never overwrites the settled one and nothing is counted twice.
func TestSpoolReplaysAfterRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	down := &flaky{sink: f.st}
	down.fails.Store(1 << 30)
	w1 := newWriter(t, down, ledger.Options{SpoolDir: dir})
	w1.Record(f.entry("a", proxy.LedgerSettled, 111))
	w1.Record(f.entry("c", proxy.LedgerHeld, 0))
	if err := w1.Flush(context.Background()); err == nil {
		t.Fatal("flush during the outage reported success")
	}
	w1.Close()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	must(t, err)
	if len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	saved, err := os.ReadFile(files[0])
	must(t, err)
	// c settled meanwhile (another replica's write, or an earlier replay).
	must(t, f.st.WriteLedger(context.Background(), []proxy.LedgerEntry{f.entry("c", proxy.LedgerSettled, 333)}))

	w2 := newWriter(t, f.st, ledger.Options{SpoolDir: dir})
	if n := len(w2.Pending()); n != 2 {
		t.Fatalf("%d entries replayed, want 2", n)
	}
	must(t, w2.Flush(context.Background()))
	must(t, os.WriteFile(filepath.Join(dir, "ledger-copy.jsonl"), append(saved, `{"TeamID":`...), 0o600))
	w3 := newWriter(t, f.st, ledger.Options{SpoolDir: dir})
	must(t, w3.Flush(context.Background()))

	rows := f.rows(t)
	if len(rows) != 2 || rows["a"].Status != proxy.LedgerSettled || rows["a"].CostMicros != 111 ||
		rows["c"].Status != proxy.LedgerSettled || rows["c"].CostMicros != 333 {
		t.Fatalf("rows after two replays = %+v, want a settled at 111 and c settled at 333", rows)
	}
	w2.Close()
	w3.Close()
	left, err := filepath.Glob(filepath.Join(dir, "*"))
	must(t, err)
	if len(left) != 0 {
		t.Errorf("spool files left after every row was written: %v", left)
	}
}

// TestSpoolBound: past MaxRows unwritten entries the writer is unhealthy (paid
// admissions fail closed) even before MaxLag; a spool directory that cannot
// be made refuses to start.
func TestSpoolBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	down := &flaky{sink: f.st}
	down.fails.Store(1 << 30)
	w := newWriter(t, down, ledger.Options{SpoolDir: t.TempDir(), MaxRows: 5})
	for i := range 4 {
		w.Record(f.entry(string(rune('a'+i)), proxy.LedgerSettled, 1))
	}
	w.Flush(context.Background())
	if !w.Healthy() {
		t.Fatal("unhealthy below MaxRows")
	}
	w.Record(f.entry("e", proxy.LedgerSettled, 1))
	if w.Healthy() {
		t.Fatal("healthy with MaxRows entries unwritten")
	}
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	if _, err := ledger.New(f.st, ledger.Options{SpoolDir: filepath.Join(file, "spool")}); err == nil {
		t.Fatal("a spool that cannot be created was accepted")
	}
}

// TestSpoolClearedOnRecovery: once Postgres answers again the same writer
// writes what it spooled and empties its spool file.
func TestSpoolClearedOnRecovery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	sink := &flaky{sink: f.st}
	sink.fails.Store(2)
	w := newWriter(t, sink, ledger.Options{SpoolDir: dir})
	w.Record(f.entry("a", proxy.LedgerSettled, 5))
	spooled := func() (size int64) {
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		must(t, err)
		for _, name := range files {
			st, err := os.Stat(name)
			must(t, err)
			size += st.Size()
		}
		return size
	}
	for range 2 {
		if w.Flush(context.Background()) == nil {
			t.Fatal("flush during the outage reported success")
		}
	}
	if spooled() == 0 {
		t.Fatal("nothing spooled during the outage")
	}
	must(t, w.Flush(context.Background()))
	if n := spooled(); n != 0 || len(f.rows(t)) != 1 {
		t.Fatalf("after recovery: %d bytes still spooled, %d rows; want 0 and 1", n, len(f.rows(t)))
	}
}
