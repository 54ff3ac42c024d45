package observe

import (
	"log/slog"
	"strconv"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
)

// SecurityEvents is the proxy.Observer that reports the gateway's security
// events: a refused credential (invalid, revoked, expired), a key used inside
// its rotation grace, a cut-off member's attempt, a fail-closed admission, an
// upstream refused as metadata or link-local, and implausible reported usage.
// A member refused by their own rate, token, concurrency or budget limit is
// not one: that is the limit working, and its request line says so.
type SecurityEvents struct {
	log   *slog.Logger
	names Names
}

var _ proxy.Observer = (*SecurityEvents)(nil)

// NewSecurityEvents logs through log (built on Handler, so bursts fold).
func NewSecurityEvents(log *slog.Logger, names Names) *SecurityEvents {
	return &SecurityEvents{log: log, names: names}
}

// Started does nothing.
func (*SecurityEvents) Started(int64, int64) {}

// The controls and outcomes the gateway reports, by Outcome.Refusal.
var refusalEvents = map[string][2]string{
	"invalid_key":                     {"api_key", "refused_invalid"},
	"revoked":                         {"api_key", "refused_revoked"},
	"expired":                         {"api_key", "refused_expired"},
	"cut_off":                         {"member_cut_off", "refused"},
	"route_disabled":                  {"credential_grant", "refused"},
	string(limiter.ReasonUnavailable): {"limiter", "failed_closed"},
}

// Finished reports the request's security events, if any.
func (s *SecurityEvents) Finished(o proxy.Outcome) {
	if ev, ok := refusalEvents[o.Refusal]; ok {
		s.report(o, ev[0], ev[1])
	}
	if o.KeyInGrace {
		s.report(o, "key_rotation", "used_in_grace")
	}
	if o.UpstreamError == "forbidden_address" {
		s.report(o, "upstream_address_guard", "refused")
	}
	if o.LedgerStatus == proxy.LedgerImplausible {
		s.report(o, "reported_usage", "implausible")
	}
}

func (s *SecurityEvents) report(o proxy.Outcome, control, outcome string) {
	attrs := make([]slog.Attr, 0, 8)
	if o.TeamID != 0 {
		attrs = append(attrs, slog.String("team", s.names.TeamName(o.TeamID)), slog.String("member", strconv.FormatInt(o.MemberID, 10)),
			slog.String("member_email", s.names.MemberEmail(o.MemberID)), slog.String("key_id", o.KeyID))
	}
	attrs = append(attrs, slog.String("request_id", o.RequestID), slog.String("address", o.ClientAddr))
	if o.RoutePrefix != "" {
		attrs = append(attrs, slog.String("route", o.RoutePrefix))
	}
	if o.CredentialFault != "" {
		attrs = append(attrs, slog.String("credential_fault", o.CredentialFault))
	}
	if o.LedgerStatus == proxy.LedgerImplausible {
		u := o.Usage
		attrs = append(attrs, slog.String("model", o.Model), slog.Int("upstream_status", o.UpstreamStatus),
			slog.Int64("input_tokens", u.InputTokens), slog.Int64("cache_write_tokens", u.CacheWriteTokens),
			slog.Int64("cache_read_tokens", u.CacheReadTokens), slog.Int64("output_tokens", u.OutputTokens),
			slog.Int64("held_micros", o.HeldMicros))
	}
	Security(ctxOf(o), s.log, control, outcome, attrs...)
}
