package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// idempotent serves a creating POST that carries an Idempotency-Key at most
// once per key: the first response is stored and replayed for 24 hours to a
// retry of the same request (method, path and body); the same key on another
// request is a 422; a retry while the first is still being served is a 409.
// Keys are scoped to the token's team (or the deployment), so two teams
// cannot see each other's responses. A server error is not stored: a retry
// runs again. A response carrying a secret is not stored either (see secret).
func (a *API) idempotent() func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		key := ctx.Header("Idempotency-Key")
		if key == "" || ctx.Operation().Metadata["idempotent"] != true {
			next(ctx)
			return
		}
		if len(key) > 255 {
			writeHumaProblem(ctx, problem(http.StatusUnprocessableEntity, ProblemValidation, "Idempotency-Key must be at most 255 characters"))
			return
		}
		body, err := io.ReadAll(io.LimitReader(ctx.BodyReader(), maxBody+1))
		if err != nil || len(body) > maxBody {
			writeHumaProblem(ctx, problem(http.StatusRequestEntityTooLarge, ProblemValidation, "request body too large or unreadable"))
			return
		}
		u := ctx.URL()
		h := sha256.New()
		for _, part := range [][]byte{[]byte(ctx.Method()), []byte(u.Path), []byte(u.RawQuery), body} {
			h.Write([]byte(strconv.Itoa(len(part)) + ":"))
			h.Write(part)
		}
		scope := scopeOf(principalFrom(ctx.Context()).token)
		stored, err := a.st.ClaimIdempotencyKey(ctx.Context(), scope, key, h.Sum(nil))
		switch {
		case errors.Is(err, store.ErrIdempotencyMismatch):
			writeHumaProblem(ctx, problem(http.StatusUnprocessableEntity, ProblemIdempotencyReused,
				"this Idempotency-Key was used for a different request; use a new key for a new request"))
			return
		case errors.Is(err, store.ErrIdempotencyInFlight):
			ctx.SetHeader("Retry-After", "1")
			writeHumaProblem(ctx, problem(http.StatusConflict, ProblemIdempotencyBusy,
				"the first request with this Idempotency-Key is still being served; retry shortly"))
			return
		case err != nil:
			writeHumaProblem(ctx, a.fromStore(err, "idempotency key"))
			return
		case stored != nil:
			ctx.SetHeader("Content-Type", stored.ContentType)
			ctx.SetHeader("Idempotent-Replayed", "true")
			ctx.SetStatus(stored.Status)
			ctx.BodyWriter().Write(stored.Body)
			return
		}
		rec := &recorder{humaContext: ctx, body: bytes.NewReader(body)}
		next(rec)
		if rec.status == 0 || rec.status >= 500 {
			if err := a.st.ReleaseIdempotencyKey(ctx.Context(), scope, key); err != nil {
				a.log.Error("idempotency key not released; retries with it wait 24h", "err", err)
			}
			return
		}
		first := store.IdempotentResponse{Status: rec.status, ContentType: rec.contentType, Body: rec.out.Bytes()}
		if ctx.Operation().Metadata["secret"] == true && rec.status < 300 {
			first = secretShown(rec.out.Bytes())
		}
		if err := a.st.FinishIdempotencyKey(ctx.Context(), scope, key, first); err != nil {
			a.log.Error("idempotent response not stored; a retry is answered 409", "err", err)
		}
	}
}

// secretShown is what a replay of a secret-bearing response answers: what
// the first request created, without its secret.
func secretShown(body []byte) store.IdempotentResponse {
	var created struct {
		ID         any    `json:"id"`
		Email      string `json:"email"`
		InviteLink string `json:"invite_link"`
	}
	json.Unmarshal(body, &created)
	what := fmt.Sprintf("key %v", created.ID)
	switch {
	case created.InviteLink != "":
		what = "the member " + created.Email + " with an invite"
	case created.ID == nil:
		what = "an invite for " + created.Email
	}
	p := problem(http.StatusConflict, ProblemSecretShown, "the first request with this Idempotency-Key created "+what+
		"; its secret was in that response only and is not kept, so it cannot be replayed")
	raw, _ := json.Marshal(p)
	return store.IdempotentResponse{Status: p.Status, ContentType: "application/problem+json", Body: raw}
}

// scopeOf is the namespace of a token's idempotency keys.
func scopeOf(t store.AdminToken) string {
	if t.TeamID == nil {
		return "deployment"
	}
	return "team:" + strconv.FormatInt(*t.TeamID, 10)
}

// humaContext names huma.Context so recorder can embed it: a field called
// Context would hide the interface's Context method.
type humaContext = huma.Context

// recorder serves the request from the body already read, and keeps a copy
// of the response it writes.
type recorder struct {
	humaContext
	body        io.Reader
	status      int
	contentType string
	out         bytes.Buffer
}

func (r *recorder) BodyReader() io.Reader { return r.body }

func (r *recorder) SetStatus(code int) {
	r.status = code
	r.humaContext.SetStatus(code)
}

func (r *recorder) Status() int { return r.status }

func (r *recorder) SetHeader(name, value string) {
	if http.CanonicalHeaderKey(name) == "Content-Type" {
		r.contentType = value
	}
	r.humaContext.SetHeader(name, value)
}

func (r *recorder) BodyWriter() io.Writer { return io.MultiWriter(r.humaContext.BodyWriter(), &r.out) }
