package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/proxy"
)

// TestShutdownDrainsOpenStreams: a replica told to stop (SIGTERM) while 50
// streams are open lets every one of them finish, settles each, and flushes
// their ledger rows before it exits. Nothing admitted is lost.
func TestShutdownDrainsOpenStreams(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gw := f.replica(t)
	stream := strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":20,"stream":true`, 1)
	const streams = 50
	var wg sync.WaitGroup
	started := make(chan struct{}, streams)
	results := make(chan response, streams)
	for range streams {
		wg.Go(func() {
			req := anthropicRequest(t, gw.URL, f.key, stream)
			req.Header.Set("X-Mock-Event-Interval-Ms", "50") // about 1.5 s per stream
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			started <- struct{}{}
			r, err := readAll(resp)
			if err != nil {
				t.Errorf("stream cut during shutdown: %v", err)
			}
			results <- r
		})
	}
	for range streams {
		<-started
	}
	stopped := make(chan error, 1)
	go func() { stopped <- gw.Stop() }()
	wg.Wait()
	close(results)
	ids := map[string]bool{}
	for r := range results {
		if r.status != http.StatusOK || !strings.Contains(r.body, "message_stop") {
			t.Fatalf("a stream did not complete: %d", r.status)
		}
		ids[r.header.Get(proxy.RequestIDHeader)] = true
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not finish shutting down")
	}
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 1000)
	must(t, err)
	settled := 0
	for _, r := range rows {
		if ids[r.RequestID] && r.Status == proxy.LedgerSettled {
			settled++
		}
	}
	if len(ids) != streams || settled != streams {
		t.Fatalf("%d streams completed, %d ledger rows settled after shutdown; want %d of each", len(ids), settled, streams)
	}
}

func readAll(resp *http.Response) (response, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// TestShutdownDuringPostgresOutageKeepsTheLedger: Postgres is cut by a
// forwarder, the replica keeps admitting (its ledger is healthy for 30 s),
// streams are still open when it is told to stop (SIGTERM); it stops without
// Postgres, and a replica started on the same LEDGER_SPOOL_DIR once Postgres is
// back writes every admitted request's final row, once.
func TestShutdownDuringPostgresOutageKeepsTheLedger(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spool := t.TempDir()
	pg := apptest.NewTCPProxy(t, "127.0.0.1:5432")
	gw := f.replicaWith(t, map[string]string{"DATABASE_URL": pg.Via(f.dbURL), "LEDGER_SPOOL_DIR": spool})
	admitted := map[string]bool{}
	admit := func(r response) {
		t.Helper()
		if r.status != http.StatusOK {
			t.Fatalf("request refused: %d %s", r.status, r.body)
		}
		admitted[r.header.Get(proxy.RequestIDHeader)] = true
	}
	for range 3 {
		admit(do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)))
	}
	pg.Stop()
	for range 20 {
		admit(do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)))
	}
	stream := strings.Replace(messagesBody, `"max_tokens":32`, `"max_tokens":20,"stream":true`, 1)
	const streams = 5
	open := make(chan *http.Response, streams)
	for range streams {
		req := anthropicRequest(t, gw.URL, f.key, stream)
		req.Header.Set("X-Mock-Event-Interval-Ms", "50")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		open <- resp
	}
	close(open)
	stopped := make(chan error, 1)
	go func() { stopped <- gw.Stop() }()
	for resp := range open {
		r, err := readAll(resp)
		must(t, err)
		admit(r)
	}
	select {
	case <-stopped:
	case <-time.After(45 * time.Second):
		t.Fatal("the replica did not stop without Postgres")
	}

	f.replicaWith(t, map[string]string{"LEDGER_SPOOL_DIR": spool})
	var missing []string
	eventually(t, 15*time.Second, "every admitted request's row after the restart", func() bool {
		rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 10000)
		must(t, err)
		missing = missing[:0]
		final := map[string]bool{}
		for _, r := range rows {
			final[r.RequestID] = r.Status == proxy.LedgerSettled && r.CostMicros > 0
		}
		for id := range admitted {
			if !final[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	})
	if len(admitted) != 3+20+streams {
		t.Fatalf("%d distinct requests admitted, want %d", len(admitted), 3+20+streams)
	}
	eventually(t, 10*time.Second, "the spool emptied once written", func() bool {
		files, _ := filepath.Glob(filepath.Join(spool, "*"))
		for _, name := range files {
			if st, err := os.Stat(name); err == nil && st.Size() > 0 {
				return false
			}
		}
		return true
	})
}
