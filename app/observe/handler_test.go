package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/proxy"
)

// logged is a logger on observe.Handler writing JSON into a buffer.
type logged struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	h      *observe.Handler
	log    *slog.Logger
	counts map[string]int
}

func (l *logged) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func newLogged() *logged {
	l := &logged{counts: map[string]int{}}
	l.h = observe.NewHandler(slog.NewJSONHandler(l, nil), observe.HandlerOptions{Window: time.Hour,
		OnEvent: func(control, outcome string) { l.mu.Lock(); l.counts[control+"/"+outcome]++; l.mu.Unlock() }})
	l.log = slog.New(l.h)
	return l
}

func (l *logged) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestBurstFromOneAddressIsOneEventWithACount(t *testing.T) {
	t.Parallel()
	l := newLogged()
	ctx := context.Background()
	for i := range 5000 {
		observe.Security(ctx, l.log, "api_key", "refused_invalid", slog.String("address", "203.0.113.9"),
			slog.String("request_id", fmt.Sprint("req_", i)))
	}
	if got := l.lines(t); len(got) != 1 || got[0]["count"] != 1.0 || got[0]["request_id"] != "req_0" {
		t.Fatalf("before the window ends: %v, want the first event alone", got)
	}
	l.h.Flush()
	got := l.lines(t)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2", len(got))
	}
	s := got[1]
	if s["summary"] != true || s["count"] != 4999.0 || s["addresses"] != 1.0 || s["top_addresses"] != "203.0.113.9×4999" ||
		s["control"] != "api_key" || s["outcome"] != "refused_invalid" || s["first_request_id"] != "req_1" {
		t.Errorf("summary = %v", s)
	}
	if l.counts["api_key/refused_invalid"] != 5000 {
		t.Errorf("OnEvent saw %d events, want every one of 5000", l.counts["api_key/refused_invalid"])
	}
}

func TestSprayFromManyAddressesIsOneEventToo(t *testing.T) {
	t.Parallel()
	l := newLogged()
	for i := range 3000 {
		observe.Security(context.Background(), l.log, "api_key", "refused_invalid", slog.String("address", fmt.Sprintf("10.%d.%d.1", i/250, i%250)))
	}
	l.h.Flush()
	got := l.lines(t)
	if len(got) != 2 || got[1]["count"] != 2999.0 || got[1]["addresses"] != 2999.0 {
		t.Fatalf("got %v, want the first event and one summary over 2999 addresses", got)
	}
	if n := strings.Count(got[1]["top_addresses"].(string), "×"); n != 5 {
		t.Errorf("top_addresses %q names %d addresses, want the top 5", got[1]["top_addresses"], n)
	}
}

func TestSustainedBurstLogsOnlySummaries(t *testing.T) {
	t.Parallel()
	l := newLogged()
	member := []slog.Attr{slog.String("team", "acme"), slog.String("member", "7")}
	for window := range 3 {
		for range 100 {
			observe.Security(context.Background(), l.log, "rate_limit", "refused", member...)
		}
		l.h.Flush()
		if got := l.lines(t); len(got) != 2+window {
			t.Fatalf("after window %d: %d lines, want %d (the first, then one summary per window)", window, len(got), 2+window)
		}
	}
	// Another member's events are their own burst.
	observe.Security(context.Background(), l.log, "rate_limit", "refused", slog.String("team", "acme"), slog.String("member", "8"))
	// A quiet window ends the burst: the next event is logged at once again.
	l.h.Flush()
	l.h.Flush()
	observe.Security(context.Background(), l.log, "rate_limit", "refused", member...)
	got := l.lines(t)
	if len(got) != 6 || got[4]["member"] != "8" || got[5]["summary"] != nil || got[5]["count"] != 1.0 {
		t.Errorf("lines %v", got)
	}
}

func TestHandlerPutsTraceAndEventsOnTheSpan(t *testing.T) {
	t.Parallel()
	l := newLogged()
	rec := tracetest.NewSpanRecorder()
	ctx, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(context.Background(), "request")
	l.log.InfoContext(ctx, "hello")
	observe.Security(ctx, l.log, "budget", "refused", slog.String("team", "acme"), slog.Int64("hold_micros", 5))
	span.End()
	got := l.lines(t)
	if len(got) != 2 || got[0]["trace_id"] != span.SpanContext().TraceID().String() || got[1]["trace_id"] == nil {
		t.Errorf("lines %v, want both with the span's trace id", got)
	}
	ev := rec.Ended()[0].Events()
	if len(ev) != 1 || ev[0].Name != "security event" || fmt.Sprint(ev[0].Attributes) == "" ||
		!strings.Contains(fmt.Sprint(ev[0].Attributes), "budget") || !strings.Contains(fmt.Sprint(ev[0].Attributes), "hold_micros") {
		t.Errorf("span events %v", ev)
	}
}

// TestAdmissionFailuresAreFolded: a Redis outage fails every admission; the
// gateway's error line for it is written once, then once per window with a
// count, and is no security event.
func TestAdmissionFailuresAreFolded(t *testing.T) {
	t.Parallel()
	l := newLogged()
	for i := range 5000 {
		l.log.Error(proxy.AdmissionFailedMsg, "request_id", fmt.Sprint("req_", i), "err", "limiter: admit 1/1: context deadline exceeded")
	}
	l.log.Error("something else")
	l.h.Flush()
	got := l.lines(t)
	if len(got) != 3 || got[0]["msg"] != proxy.AdmissionFailedMsg || got[0]["request_id"] != "req_0" || got[0]["count"] != 1.0 ||
		got[1]["msg"] != "something else" || got[2]["msg"] != proxy.AdmissionFailedMsg || got[2]["count"] != 4999.0 || got[2]["summary"] != true {
		t.Fatalf("lines %v, want the first failure, the other line, and one summary of 4999", got)
	}
	if len(l.counts) != 0 {
		t.Errorf("security events %v, want none", l.counts)
	}
}
