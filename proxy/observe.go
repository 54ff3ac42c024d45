package proxy

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/proxy/usage"
)

// Outcome is what happened to one request, reported to every Observer once the
// gateway has answered it. Fields are zero where the request never got that far.
type Outcome struct {
	RequestID string // the gateway's own id, as in the X-Tollgate-Request-Id header
	Start     time.Time
	Duration  time.Duration
	Method    string
	Status    int // what the gateway answered the caller

	TeamID, MemberID int64
	KeyID            string
	RouteID          int64
	RoutePrefix      string

	// Refusal names the control that answered instead of the upstream: a short,
	// fixed code (invalid_key, revoked, rate, budget, ...); "" when forwarded.
	Refusal string
	// RefusalScope says whose limit refused it (member, team) when the limiter did.
	RefusalScope string
	Admitted     bool
	// UpstreamStatus and TTFB describe the upstream's answer; 0 if none came.
	UpstreamStatus int
	TTFB           time.Duration

	Model           string
	HeldMicros      int64
	CostMicros      int64
	LedgerStatus    LedgerStatus
	Usage           usage.Usage
	BudgetRemaining int64 // -1 when no budget applies

	// Queued is how long the request waited in its team's waiting room; 0 if it
	// never did.
	Queued time.Duration

	// Ctx is the request's context, for observers that annotate its trace span;
	// valid during Finished only.
	Ctx context.Context
	// ClientAddr is the caller's IP as this process sees it (behind a proxy, the
	// proxy's), to group refused credentials by source.
	ClientAddr string
	// CredentialFault says what was wrong with an invalid_key: missing,
	// malformed, unknown_id or wrong_secret. The caller gets the same answer for
	// all four; this is for the operator's security events only.
	CredentialFault string
	// KeyInGrace is set when the key was rotated and is inside its grace window.
	KeyInGrace bool
	// UpstreamError says why the upstream call failed (forbidden_address,
	// timeout, unreachable, client_gone, circuit_open) or why the gateway cut a
	// response that had started (stream_idle, response_too_large,
	// request_timeout); "" when it answered in full or was not called.
	UpstreamError string
}

// clientAddr is the host part of r.RemoteAddr.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Observer learns of every request: metrics, the live dashboard, access logs.
// Calls happen on the request's goroutine and must not block.
type Observer interface {
	// Started is called when a request has been admitted and is about to go upstream.
	Started(teamID, memberID int64)
	// Finished is called once per request, admitted or not, after it was answered.
	Finished(Outcome)
}

// QueueObserver is an Observer that also learns when a request enters (+1) and
// leaves (-1) its team's waiting room, for the room's depth per member.
type QueueObserver interface {
	Queued(teamID, memberID int64, delta int)
}

// statusRecorder remembers the status the gateway answered with. Unwrap lets
// http.ResponseController reach the real writer for flushes and deadlines.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() { http.NewResponseController(s.ResponseWriter).Flush() }

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
