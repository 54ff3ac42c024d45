package observe

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/tollgate/tollgate/proxy"
)

// RequestLog writes one line per request, message "request": who (team name,
// member id and email, key id), what (route, method, model), how it ended (status,
// refusal, upstream status and error), how long (duration_ms, ttfb_ms) and how
// much (tokens by class, cost_micros). Under load it logs one request in
// every N (LOG_SAMPLE_EVERY), saying so in "sampled"; a refusal, an error
// status, an upstream failure or an uncertain charge is always logged.
type RequestLog struct {
	log   *slog.Logger
	every uint64
	seen  atomic.Uint64
	names Names
}

// Names puts names to the ids an outcome carries, from the config snapshot:
// a person reading the log knows a member by email, not by row id.
type Names interface {
	TeamName(id int64) string
	MemberEmail(id int64) string
}

var _ proxy.Observer = (*RequestLog)(nil)

// NewRequestLog logs through log, one ordinary request in every.
func NewRequestLog(log *slog.Logger, every int, names Names) *RequestLog {
	return &RequestLog{log: log, every: uint64(max(every, 1)), names: names}
}

// Started does nothing: the line is written once the request is answered.
func (*RequestLog) Started(int64, int64) {}

// Finished writes the request's line, or skips it when sampled out.
func (l *RequestLog) Finished(o proxy.Outcome) {
	always := o.Refusal != "" || o.Status >= 400 || o.Status == 0 || o.UpstreamError != "" ||
		o.LedgerStatus == proxy.LedgerUncertain
	if !always && l.every > 1 && l.seen.Add(1)%l.every != 0 {
		return
	}
	level := slog.LevelInfo
	if o.Status >= 500 || o.UpstreamError != "" && o.UpstreamError != "client_gone" {
		level = slog.LevelWarn
	}
	if !l.log.Enabled(ctxOf(o), level) {
		return // LOG_LEVEL above it: build nothing
	}
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs, slog.String("request_id", o.RequestID))
	if o.TeamID != 0 {
		attrs = append(attrs, slog.String("team", l.names.TeamName(o.TeamID)), slog.String("member", strconv.FormatInt(o.MemberID, 10)),
			slog.String("member_email", l.names.MemberEmail(o.MemberID)), slog.String("key_id", o.KeyID))
	}
	attrs = append(attrs, slog.String("route", o.RoutePrefix), slog.String("method", o.Method), slog.Int("status", o.Status),
		slog.Float64("duration_ms", ms(o.Duration.Microseconds())))
	if o.Refusal != "" {
		attrs = append(attrs, slog.String("refusal", o.Refusal))
		if o.RefusalScope != "" {
			attrs = append(attrs, slog.String("scope", o.RefusalScope))
		}
	}
	if o.Admitted {
		attrs = append(attrs, slog.Int("upstream_status", o.UpstreamStatus), slog.Float64("ttfb_ms", ms(o.TTFB.Microseconds())))
		if o.UpstreamError != "" {
			attrs = append(attrs, slog.String("upstream_error", o.UpstreamError))
		}
		if o.Model != "" {
			attrs = append(attrs, slog.String("model", o.Model))
		}
		u := o.Usage
		attrs = append(attrs, slog.Group("tokens", slog.Int64("input", u.InputTokens), slog.Int64("output", u.OutputTokens),
			slog.Int64("cache_read", u.CacheReadTokens), slog.Int64("cache_write", u.CacheWriteTokens),
			slog.Int64("reasoning", u.ReasoningTokens)),
			slog.Int64("cost_micros", o.CostMicros), slog.String("ledger", string(o.LedgerStatus)))
	}
	if o.BudgetRemaining >= 0 {
		attrs = append(attrs, slog.Int64("budget_remaining_micros", o.BudgetRemaining))
	}
	if !always && l.every > 1 {
		attrs = append(attrs, slog.Int("sampled", int(l.every)))
	}
	l.log.LogAttrs(ctxOf(o), level, "request", attrs...)
}

func ms(micros int64) float64 { return float64(micros) / 1000 }

func ctxOf(o proxy.Outcome) context.Context {
	if o.Ctx == nil {
		return context.Background()
	}
	return o.Ctx
}
