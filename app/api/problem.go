package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// problemBase prefixes every problem type: a URN, so the types are stable
// identifiers a client can switch on, not links that may move.
const problemBase = "urn:tollgate:problem:"

// The problem types the API answers with. They are part of the API: a client
// may switch on them, so they never change meaning.
const (
	ProblemUnauthenticated   = problemBase + "unauthenticated"          // 401: no, malformed, unknown, revoked or expired token
	ProblemForbidden         = problemBase + "forbidden"                // 403: a read token on a write, a team token on a deployment operation, deciding one's own case
	ProblemNotFound          = problemBase + "not-found"                // 404: no such thing in the token's team, or no such operation
	ProblemMethodNotAllowed  = problemBase + "method-not-allowed"       // 405: a known path asked with a method it does not take
	ProblemConflict          = problemBase + "conflict"                 // 409: it already exists
	ProblemStale             = problemBase + "stale-state"              // 409: already rotated, revoked, ...; often a concurrent call won
	ProblemIdempotencyBusy   = problemBase + "idempotency-in-flight"    // 409: the first request with the key is still running
	ProblemIdempotencyReused = problemBase + "idempotency-key-reused"   // 422: same key, different request
	ProblemSecretShown       = problemBase + "idempotency-secret-shown" // 409: a replay of a response whose secret was shown once
	ProblemValidation        = problemBase + "validation"               // 422 (or 400 for a body that is not JSON)
	ProblemRateLimited       = problemBase + "rate-limited"             // 429
	ProblemUnavailable       = problemBase + "unavailable"              // 503: the rate limiter could not decide
	ProblemInternal          = problemBase + "internal"                 // 500
)

// Problem is an RFC 9457 problem details object, the body of every error.
type Problem struct {
	Type   string          `json:"type" format:"uri" doc:"A stable identifier of the kind of problem (urn:tollgate:problem:...)."`
	Title  string          `json:"title" doc:"A short summary of the kind of problem."`
	Status int             `json:"status" doc:"The HTTP status code."`
	Detail string          `json:"detail,omitempty" doc:"What went wrong this time, for a person."`
	Errors []ProblemDetail `json:"errors,omitempty" doc:"The fields at fault, for a validation problem."`
}

// ProblemDetail names one field at fault.
type ProblemDetail struct {
	Location string `json:"location,omitempty" doc:"Where: body.<field>, query.<name>, path.<name>."`
	Message  string `json:"message"`
}

func (p *Problem) Error() string  { return p.Detail }
func (p *Problem) GetStatus() int { return p.Status }
func (p *Problem) ContentType(ct string) string {
	if ct == "application/json" {
		return "application/problem+json"
	}
	return ct
}

func problem(status int, typ, detail string) *Problem {
	return &Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail}
}

// typeOfStatus is the problem type of an error huma raises itself (a body
// that fails its schema, a malformed parameter), by status.
func typeOfStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return ProblemValidation
	case http.StatusUnauthorized:
		return ProblemUnauthenticated
	case http.StatusForbidden:
		return ProblemForbidden
	case http.StatusNotFound:
		return ProblemNotFound
	case http.StatusConflict:
		return ProblemConflict
	case http.StatusTooManyRequests:
		return ProblemRateLimited
	case http.StatusServiceUnavailable:
		return ProblemUnavailable
	}
	return ProblemInternal
}

func init() {
	// huma builds its own errors (request validation) through NewError, and
	// documents every operation's errors with the type NewError returns: both
	// become Problem.
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		p := problem(status, typeOfStatus(status), msg)
		for _, err := range errs {
			if err == nil {
				continue
			}
			d := ProblemDetail{Message: err.Error()}
			var hd *huma.ErrorDetail
			if errors.As(err, &hd) {
				d = ProblemDetail{Location: hd.Location, Message: hd.Message}
			}
			p.Errors = append(p.Errors, d)
		}
		return p
	}
}

// fromStore turns a store error into the problem a caller sees; what names
// the thing for a not-found or conflict message. A validation error names its
// field in the body, as the store names it.
func (a *API) fromStore(err error, what string) *Problem {
	return a.fromStoreAt(err, what, func(field string) string { return "body." + field })
}

// fromStoreAt is fromStore for an operation that takes a field elsewhere or
// under another name: at is where a field the store names is in the request.
func (a *API) fromStoreAt(err error, what string, at func(field string) string) *Problem {
	var v *store.ValidationError
	var s *store.StateError
	var f *store.ForbiddenError
	switch {
	case errors.As(err, &f):
		return problem(http.StatusForbidden, ProblemForbidden, f.Message)
	case errors.As(err, &v):
		p := problem(http.StatusUnprocessableEntity, ProblemValidation, v.Message)
		p.Errors = []ProblemDetail{{Location: at(v.Field), Message: v.Message}}
		return p
	case errors.As(err, &s):
		return problem(http.StatusConflict, ProblemStale, s.Message)
	case errors.Is(err, store.ErrNotFound):
		return problem(http.StatusNotFound, ProblemNotFound, "no "+what+" in this team")
	case errors.Is(err, store.ErrConflict):
		return problem(http.StatusConflict, ProblemConflict, strings.ToUpper(what[:1])+what[1:]+" already exists")
	}
	a.log.Error("admin API request failed", "err", err)
	return problem(http.StatusInternalServerError, ProblemInternal, "internal error; the server log has the details")
}

// writeHumaProblem answers with p from a middleware, before any handler ran.
func writeHumaProblem(ctx huma.Context, p *Problem) {
	ctx.SetHeader("Content-Type", "application/problem+json")
	ctx.SetStatus(p.Status)
	json.NewEncoder(ctx.BodyWriter()).Encode(p)
}

// writeProblem answers with p outside huma (unknown paths).
func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}
