package faulty

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRefused(t *testing.T) {
	t.Parallel()
	_, err := http.Get(Refused(t))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want ECONNREFUSED", err)
	}
}

func TestHangBeforeHeaders(t *testing.T) {
	t.Parallel()
	t.Run("ClientTimesOut", func(t *testing.T) {
		t.Parallel()
		s := HangBeforeHeaders(t)
		client := &http.Client{Timeout: 100 * time.Millisecond}
		_, err := client.Post(s.URL, "application/json", strings.NewReader(`{"model":"m"}`))
		var netErr net.Error
		if !errors.As(err, &netErr) || !netErr.Timeout() {
			t.Fatalf("err = %v, want a timeout", err)
		}
		if s.Requests() != 1 || s.RequestsFor(http.MethodPost) != 1 || s.RequestsFor(http.MethodGet) != 0 {
			t.Fatalf("requests = %d, POST %d, GET %d; want 1, 1, 0",
				s.Requests(), s.RequestsFor(http.MethodPost), s.RequestsFor(http.MethodGet))
		}
	})
	t.Run("CloseEndsTheHang", func(t *testing.T) {
		t.Parallel()
		s := HangBeforeHeaders(t)
		done := make(chan error, 1)
		go func() {
			resp, err := http.Get(s.URL)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		waitFor(t, func() bool { return s.Requests() == 1 })
		start := time.Now()
		s.Close()
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %v with a request hanging", d)
		}
		if err := <-done; err == nil {
			t.Error("the hung request got an answer, want an error")
		}
	})
}

func TestResetMidStream(t *testing.T) {
	t.Parallel()
	s := ResetMidStream(t, 3)
	resp, err := http.Post(s.URL, "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %d %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatal("the stream ended cleanly, want a read error")
	}
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	if len(events) != 3 || !strings.HasPrefix(events[0], "event: message_start\n") ||
		!strings.HasPrefix(events[2], "event: content_block_delta\n") {
		t.Fatalf("read before the error:\n%s", body)
	}
	var start struct {
		Message struct {
			Usage struct {
				InputTokens int64 `json:"input_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[0], "event: message_start\ndata: ")), &start); err != nil {
		t.Fatal(err)
	}
	if start.Message.Usage.InputTokens != ResetInputTokens {
		t.Errorf("message_start input_tokens = %d, want %d", start.Message.Usage.InputTokens, ResetInputTokens)
	}
	if s.BytesWritten() != int64(len(body)) {
		t.Errorf("BytesWritten = %d, client read %d", s.BytesWritten(), len(body))
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	s := Status(t, http.StatusServiceUnavailable)
	const storm = 50
	var wg sync.WaitGroup
	for range storm {
		wg.Go(func() {
			resp, err := http.Post(s.URL, "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var body struct {
				Type  string
				Error struct{ Type string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Error(err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || body.Type != "error" || body.Error.Type != "api_error" {
				t.Errorf("got %d %+v, want 503 with an api_error", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	if s.Requests() != storm || s.RequestsFor(http.MethodPost) != storm {
		t.Errorf("requests = %d, POST %d; want %d", s.Requests(), s.RequestsFor(http.MethodPost), storm)
	}
}

// TestHuge is not parallel: it measures the process's allocations while the body streams.
func TestHuge(t *testing.T) {
	const n = 64 << 20
	for _, withLength := range []bool{true, false} {
		s := Huge(t, n, withLength)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := http.Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		read, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)

		wantLength := int64(-1)
		if withLength {
			wantLength = n
		}
		if resp.ContentLength != wantLength {
			t.Errorf("withLength %v: Content-Length %d, want %d", withLength, resp.ContentLength, wantLength)
		}
		if read != n || s.BytesWritten() != n {
			t.Errorf("withLength %v: read %d, BytesWritten %d, want %d", withLength, read, s.BytesWritten(), n)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > n/16 {
			t.Errorf("withLength %v: %d bytes allocated to stream %d", withLength, alloc, n)
		}
	}
}

func TestHugeBody(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		5:  `{"pad`,
		10: `{"pad":""}`,
		13: `{"pad":"xxx"}`,
	} {
		if got := get(t, Huge(t, n, false).URL); got != want {
			t.Errorf("Huge(%d) = %q, want %q", n, got, want)
		}
	}
	if body := get(t, Huge(t, 100<<10, true).URL); !json.Valid([]byte(body)) {
		t.Errorf("a 100 KiB body is not JSON: %.40q…", body)
	}
}

func TestHugeClientLeaves(t *testing.T) {
	t.Parallel()
	s := Huge(t, 1<<30, false)
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if w := s.BytesWritten(); w >= 1<<30 {
		t.Errorf("BytesWritten = %d, the server kept writing to nobody", w)
	}
}

func TestDribble(t *testing.T) {
	t.Parallel()
	const interval = 20 * time.Millisecond
	s := Dribble(t, interval)
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	start := time.Now()
	got := make([]byte, 5)
	for i := range got {
		// One byte per read shows each was flushed on its own.
		if _, err := io.ReadFull(resp.Body, got[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != ": dri" {
		t.Errorf("got %q, want %q", got, ": dri")
	}
	if d := time.Since(start); d < 4*interval {
		t.Errorf("5 bytes in %v, want at least %v", d, 4*interval)
	}
}

func TestFlaky(t *testing.T) {
	t.Parallel()
	s := Flaky(t, "b", 2, http.StatusBadGateway)
	var statuses []int
	var last string
	for range 3 {
		resp, err := http.Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if h := resp.Header.Get("X-Faulty-Server"); h != "b" {
			t.Errorf("X-Faulty-Server %q, want b", h)
		}
		statuses, last = append(statuses, resp.StatusCode), string(body)
	}
	if want := []int{502, 502, 200}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	if last != `{"ok":true,"server":"b"}` {
		t.Errorf("body %s", last)
	}
	if s.Requests() != 3 {
		t.Errorf("requests = %d, want 3", s.Requests())
	}
}

func TestFlakyConcurrent(t *testing.T) {
	t.Parallel()
	s := Flaky(t, "a", 7, http.StatusInternalServerError)
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			resp, err := http.Get(s.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusInternalServerError {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 7 || s.Requests() != 30 {
		t.Errorf("%d failures in %d requests, want 7 in 30", failed, s.Requests())
	}
}

func TestSlowClient(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: timeout, Handler: http.NotFoundHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	req := []byte("GET / HTTP/1.1\r\nHost: gateway\r\n\r\n") // 34 bytes: 1.7 s at this pace
	closedAfter, answer := SlowClient(t, ln.Addr().String(), req, 50*time.Millisecond, 3*time.Second)
	if closedAfter < timeout-50*time.Millisecond || closedAfter > timeout+500*time.Millisecond {
		t.Errorf("closed after %v, want about %v", closedAfter, timeout)
	}
	if bytes.Contains(answer, []byte(" 404 ")) {
		t.Errorf("the server answered the slow request: %q", answer)
	}
}

func TestSlowClientMax(t *testing.T) {
	t.Parallel()
	const max = 150 * time.Millisecond
	s := HangBeforeHeaders(t)
	closedAfter, answer := SlowClient(t, s.URL, []byte("GET / HTTP/1.1\r\nHost: up\r\n\r\n"), time.Millisecond, max)
	if closedAfter != max || len(answer) != 0 {
		t.Errorf("got %v %q, want %v and no answer", closedAfter, answer, max)
	}
	waitFor(t, func() bool { return s.Requests() == 1 })
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 2s")
		}
	}
}
