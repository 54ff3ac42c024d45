package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

// admit runs the one admission call for a request and writes its rate-limit
// headers. On refusal it answers the caller and returns false.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, log *slog.Logger, d Dialect, key Key, member Member, team Team, route Route, requestID string) bool {
	dec, err := g.opts.Limiter.Admit(r.Context(), limiter.Request{
		Team:         strconv.FormatInt(key.TeamID, 10),
		Member:       strconv.FormatInt(key.MemberID, 10),
		KeyID:        key.ID,
		RequestID:    requestID,
		MemberPolicy: member.Limits,
		TeamPolicy:   team.Limits,
		Lease:        g.opts.Lease,
		FailOpen:     route.FailOpen,
	})
	if err != nil {
		log.Error("admission failed", "err", err, "fail_open", route.FailOpen, "allowed", dec.Allowed)
	}
	setRateHeaders(w.Header(), dec)
	if dec.Allowed {
		return true
	}
	log.Info("request refused", "reason", string(dec.Reason), "scope", string(dec.Scope), "member_id", key.MemberID)
	switch dec.Reason {
	case limiter.ReasonRevoked:
		WriteError(w, d, &Error{Kind: KindAuthentication, Message: "this API key has been revoked"})
	case limiter.ReasonCutOff:
		WriteError(w, d, errMemberDisabled)
	case limiter.ReasonUnavailable:
		w.Header().Set("Retry-After", "1")
		WriteError(w, d, &Error{Kind: KindUnavailable, Message: "the gateway cannot check rate limits right now; retry shortly"})
	default:
		setRetryHeaders(w.Header(), dec.RetryAfter)
		what := "rate limit"
		if dec.Reason == limiter.ReasonConcurrency {
			what = "limit on requests in flight"
		}
		whose := "your"
		if dec.Scope == limiter.ScopeTeam {
			whose = "your team's"
		}
		WriteError(w, d, &Error{Kind: KindRateLimit, Message: whose + " " + what + " is reached; retry after " +
			strconv.FormatInt(ceilMillis(dec.RetryAfter), 10) + " ms"})
	}
	return false
}

// release frees the request's concurrency slot even when the client has gone:
// a slot left behind would count against the member until its lease ends.
func (g *Gateway) release(r *http.Request, log *slog.Logger, key Key, requestID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	err := g.opts.Limiter.Release(ctx, strconv.FormatInt(key.TeamID, 10), strconv.FormatInt(key.MemberID, 10), requestID)
	if err != nil {
		log.Warn("concurrency slot not released; its lease will free it", "err", err)
	}
}

// setRateHeaders reports the tightest rate limit, when there is one.
func setRateHeaders(h http.Header, d limiter.Decision) {
	if d.Limit == 0 || d.Reason == limiter.ReasonConcurrency {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.Reset), 10))
}

// setRetryHeaders writes both forms the official SDKs read: Retry-After in whole
// seconds (never 0, which some clients treat as "now") and retry-after-ms.
func setRetryHeaders(h http.Header, after time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(after)), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(1, ceilMillis(after)), 10))
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
func ceilMillis(d time.Duration) int64  { return int64((d + time.Millisecond - 1) / time.Millisecond) }
