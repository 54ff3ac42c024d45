// Package observe is what the gateway says about itself in its JSON log: one
// line per request (RequestLog), and security events wherever a control
// decides (Security, SecurityEvents), with the trace id of the request that
// caused them.
//
// Security events pass through Handler, a slog.Handler wrapped around the
// app's: it puts each one on the request's trace span, counts it, and folds
// bursts into one line per window, so ten thousand unknown keys from one
// address in ten seconds are one "security event" with a count, not ten
// thousand lines. The gateway's per-request failure lines that an outage
// repeats for every request (HandlerOptions.Fold: admission and settle
// failures while Redis is down) are folded the same way, so an outage at
// thousands of requests a second writes a line per window, not thousands.
package observe

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/proxy"
)

// SecurityEventMsg is the message of every security event line.
const SecurityEventMsg = "security event"

// Security logs one security event: control is the control that decided
// (api_key, rate_limit, console_sign_in, ...), outcome what it decided. attrs
// add team, member, request_id, address and the like; never a credential,
// key, password or session id. Through a logger built on Handler, the event
// also reaches the request's span and the metrics, and bursts are folded.
func Security(ctx context.Context, log *slog.Logger, control, outcome string, attrs ...slog.Attr) {
	all := append([]slog.Attr{slog.String("control", control), slog.String("outcome", outcome)}, attrs...)
	log.LogAttrs(ctx, slog.LevelWarn, SecurityEventMsg, all...)
}

// HandlerOptions tune a Handler.
type HandlerOptions struct {
	// Window is how long repeats of an event are counted before one summary line
	// reports them (default 10s).
	Window time.Duration
	// OnEvent is called for every security event, folded or not (the metrics).
	OnEvent func(control, outcome string)
	// Fold lists the other messages whose repeats are folded like security
	// events, one burst per message (default DefaultFold).
	Fold []string
}

// DefaultFold are the gateway's hot-path failure lines: each is logged once per
// failed request, so a Redis outage would otherwise write one per request.
var DefaultFold = []string{proxy.AdmissionFailedMsg, proxy.SettleFailedMsg}

// Handler adds trace_id and span_id to every record logged with a span in its
// context, and handles security events (see the package doc).
type Handler struct {
	next   slog.Handler
	events *events
}

// NewHandler wraps next.
func NewHandler(next slog.Handler, o HandlerOptions) *Handler {
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	if o.OnEvent == nil {
		o.OnEvent = func(string, string) {}
	}
	if o.Fold == nil {
		o.Fold = DefaultFold
	}
	return &Handler{next: next, events: &events{opts: o, byKey: map[string]*burst{}}}
}

// Enabled reports whether next logs level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// WithAttrs returns a Handler whose next handler has attrs; bursts stay shared.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), events: h.events}
}

// WithGroup returns a Handler whose next handler opens group; bursts stay shared.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), events: h.events}
}

// Handle passes r on, with the trace ids, unless it is a repeat of a security
// event already reported in this window.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		ctx = context.Background()
	}
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if r.Message != SecurityEventMsg {
		if !slices.Contains(h.events.opts.Fold, r.Message) {
			return h.next.Handle(ctx, r)
		}
		if !h.events.first(event{message: r.Message}, h.next, r.Level) {
			return nil
		}
		r.AddAttrs(slog.Int("count", 1))
		return h.next.Handle(ctx, r)
	}
	ev := readEvent(r)
	h.events.opts.OnEvent(ev.control, ev.outcome)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(SecurityEventMsg, trace.WithAttributes(ev.attrs...))
	}
	if !h.events.first(ev, h.next, r.Level) {
		return nil
	}
	r.AddAttrs(slog.Int("count", 1))
	return h.next.Handle(ctx, r)
}

// Run reports the bursts of each window until ctx ends, then the last one.
func (h *Handler) Run(ctx context.Context) {
	ticker := time.NewTicker(h.events.opts.Window)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			h.Flush()
			return
		case <-ticker.C:
			h.Flush()
		}
	}
}

// Flush reports every burst counted since the last flush, one line each, and
// starts a new window.
func (h *Handler) Flush() { h.events.flush() }

// event is what the folding needs from a security event record; for another
// folded message, only the message.
type event struct {
	message                                 string // "" for a security event
	control, outcome, team, member, address string
	requestID, traceID                      string
	attrs                                   []attribute.KeyValue // for the span event
}

func readEvent(r slog.Record) event {
	var ev event
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch a.Key {
		case "control":
			ev.control = v.String()
		case "outcome":
			ev.outcome = v.String()
		case "team":
			ev.team = v.String()
		case "member":
			ev.member = v.String()
		case "address":
			ev.address = v.String()
		case "request_id":
			ev.requestID = v.String()
		case "trace_id":
			ev.traceID = v.String()
		}
		switch v.Kind() {
		case slog.KindInt64:
			ev.attrs = append(ev.attrs, attribute.Int64(a.Key, v.Int64()))
		case slog.KindBool:
			ev.attrs = append(ev.attrs, attribute.Bool(a.Key, v.Bool()))
		default:
			ev.attrs = append(ev.attrs, attribute.String(a.Key, v.String()))
		}
		return true
	})
	return ev
}

// key groups repeats: per member for an authenticated caller; for one who is
// not (an unknown key, a failed sign-in), per control and outcome over every
// address, with the addresses tallied, so a spray from many addresses is one
// line too.
func (ev event) key() string {
	return ev.message + "|" + ev.control + "|" + ev.outcome + "|" + ev.team + "|" + ev.member
}

// maxAddresses bounds the addresses tallied per burst; the rest are counted.
const maxAddresses = 1000

// burst is one key's events in the current window.
type burst struct {
	first     event
	next      slog.Handler // the handler that logged the first, for its bound attrs
	level     slog.Level
	repeats   int
	addresses map[string]int
	untracked int // repeats whose address was past maxAddresses
}

type events struct {
	opts  HandlerOptions
	mu    sync.Mutex
	byKey map[string]*burst
}

// first records ev and reports whether it is to be logged now: the first of
// its key after a window without any is; repeats are counted for the summary.
// A burst's entry outlives a window that had repeats, so while the burst goes
// on only the per-window summaries are logged.
func (e *events) first(ev event, next slog.Handler, level slog.Level) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.byKey[ev.key()]
	if !ok {
		e.byKey[ev.key()] = &burst{first: ev, next: next, level: level, addresses: map[string]int{}}
		return true
	}
	b.repeats++
	if _, seen := b.addresses[ev.address]; seen || len(b.addresses) < maxAddresses {
		b.addresses[ev.address]++
	} else {
		b.untracked++
	}
	if b.repeats == 1 {
		b.first = ev // the summary names the first request it counts
	}
	return false
}

func (e *events) flush() {
	e.mu.Lock()
	var out []*burst
	for k, b := range e.byKey {
		if b.repeats == 0 {
			delete(e.byKey, k)
			continue
		}
		snapshot := *b
		out = append(out, &snapshot)
		b.repeats, b.untracked, b.addresses = 0, 0, map[string]int{}
	}
	e.mu.Unlock()
	for _, b := range out {
		e.summarise(b)
	}
}

// summarise logs one line for a window's repeats: how many, from how many
// addresses, the busiest few, and the first request's ids; for another folded
// message, how many.
func (e *events) summarise(b *burst) {
	if b.first.message != "" {
		r := slog.NewRecord(time.Now(), b.level, b.first.message, 0)
		r.AddAttrs(slog.Int("count", b.repeats), slog.Bool("summary", true), slog.String("window", e.opts.Window.String()))
		_ = b.next.Handle(context.Background(), r)
		return
	}
	r := slog.NewRecord(time.Now(), b.level, SecurityEventMsg, 0)
	r.AddAttrs(slog.String("control", b.first.control), slog.String("outcome", b.first.outcome))
	if b.first.team != "" {
		r.AddAttrs(slog.String("team", b.first.team), slog.String("member", b.first.member))
	}
	r.AddAttrs(slog.Int("count", b.repeats), slog.Bool("summary", true), slog.String("window", e.opts.Window.String()),
		slog.Int("addresses", len(b.addresses)+b.untracked), slog.String("top_addresses", top(b.addresses, 5)),
		slog.String("first_request_id", b.first.requestID))
	if b.first.traceID != "" {
		r.AddAttrs(slog.String("first_trace_id", b.first.traceID))
	}
	_ = b.next.Handle(context.Background(), r)
}

// top lists the n addresses seen most, as "addr×count" by count.
func top(counts map[string]int, n int) string {
	type ac struct {
		addr  string
		count int
	}
	list := make([]ac, 0, len(counts))
	for a, c := range counts {
		if a == "" {
			a = "-"
		}
		list = append(list, ac{a, c})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].count != list[j].count {
			return list[i].count > list[j].count
		}
		return list[i].addr < list[j].addr
	})
	parts := make([]string, 0, n)
	for i := 0; i < len(list) && i < n; i++ {
		parts = append(parts, fmt.Sprintf("%s×%d", list[i].addr, list[i].count))
	}
	return strings.Join(parts, ",")
}
