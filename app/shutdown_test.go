package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
