package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

// errBadToken is the one answer for every missing, malformed, unknown, wrong,
// revoked or expired token, so a prober learns nothing about which ids exist.
const errBadToken = "invalid or missing admin token: send it as Authorization: Bearer tga_..."

// authorize is the one place access is decided: it resolves the token to its
// team and role, rate-limits it, checks the role against the operation's
// declared access, and puts the token in the context for the handler.
func (a *API) authorize() func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		refuse := func(p *Problem, headers ...string) {
			for i := 0; i+1 < len(headers); i += 2 {
				ctx.SetHeader(headers[i], headers[i+1])
			}
			writeHumaProblem(ctx, p)
		}
		address := remoteHost(ctx.RemoteAddr())
		plaintext, ok := bearer(ctx)
		if !ok {
			fault := "missing"
			if ctx.Header("Authorization") != "" {
				fault = "malformed"
			}
			observe.Security(ctx.Context(), a.log, "admin_token", "refused_invalid", slog.String("credential_fault", fault),
				slog.String("address", address))
			refuse(problem(http.StatusUnauthorized, ProblemUnauthenticated, errBadToken), "WWW-Authenticate", `Bearer realm="tollgate"`)
			return
		}
		token, err := a.st.AuthenticateAdminToken(ctx.Context(), plaintext)
		var tokenErr *store.TokenError
		if errors.As(err, &tokenErr) {
			outcome := "refused_invalid"
			switch tokenErr.Fault {
			case "revoked", "expired", "owner_cut_off", "owner_not_owner", "unattributed":
				outcome = "refused_" + tokenErr.Fault
			}
			attrs := []slog.Attr{slog.String("credential_fault", tokenErr.Fault), slog.String("address", address)}
			if token.ID != "" {
				attrs = append(attrs, slog.String("token_id", token.ID), slog.String("token_name", token.Name))
			}
			observe.Security(ctx.Context(), a.log, "admin_token", outcome, attrs...)
			refuse(problem(http.StatusUnauthorized, ProblemUnauthenticated, errBadToken), "WWW-Authenticate", `Bearer realm="tollgate"`)
			return
		}
		if err != nil {
			refuse(a.fromStore(err, "token"))
			return
		}
		if wait, err := a.admit(ctx, token); err != nil {
			a.log.Error("admin API rate limiter failed; refusing", "token_id", token.ID, "err", err)
			refuse(problem(http.StatusServiceUnavailable, ProblemUnavailable, "the rate limiter is unavailable; retry shortly"), "Retry-After", "1")
			return
		} else if wait > 0 {
			observe.Security(ctx.Context(), a.log, "admin_api_rate_limit", "refused", slog.String("token_id", token.ID),
				slog.String("token_name", token.Name), slog.String("address", address))
			refuse(problem(http.StatusTooManyRequests, ProblemRateLimited, "this token sent too many requests; retry after the Retry-After seconds"),
				"Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			return
		}
		if p := allowed(AccessOf(ctx.Operation()), token); p != nil {
			observe.Security(ctx.Context(), a.log, "admin_token", "refused_forbidden", slog.String("token_id", token.ID),
				slog.String("token_name", token.Name), slog.String("operation", ctx.Operation().OperationID), slog.String("address", address))
			refuse(p)
			return
		}
		next(huma.WithValue(ctx, principalKey{}, principal{token: token}))
	}
}

// allowed checks a live token against an operation's access.
func allowed(access Access, t store.AdminToken) *Problem {
	forbid := func(detail string) *Problem { return problem(http.StatusForbidden, ProblemForbidden, detail) }
	switch access {
	case AccessAnyToken:
		return nil
	case AccessDeployment:
		if !t.Deployment() {
			return forbid("this operation needs a deployment token (tollgate admin token create --deployment)")
		}
		if t.Role != store.TokenRoleOwner {
			return forbid("this token may only read")
		}
		return nil
	case AccessRead, AccessOwner:
		if t.Deployment() {
			return forbid("a deployment token manages the global price list only; use a team's token")
		}
		if access == AccessOwner && t.Role != store.TokenRoleOwner {
			return forbid("this token may only read")
		}
		return nil
	}
	// An operation registered without an access decision is nobody's.
	return forbid("this operation has no access decision")
}

// admit takes one request from the token's rate limit, returning how long to
// wait when it is spent. Tokens are limited apart from the gateway's members,
// under a team of their own in the limiter, so API use never spends a
// member's limit.
func (a *API) admit(ctx huma.Context, t store.AdminToken) (time.Duration, error) {
	team := "api:deployment"
	if t.TeamID != nil {
		team = "api:" + strconv.FormatInt(*t.TeamID, 10)
	}
	d, err := a.lim.Admit(ctx.Context(), limiter.Request{Team: team, Member: t.ID, KeyID: t.ID, RequestID: requestID(),
		MemberPolicy: limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmTokenBucket, Limit: a.rate, Period: time.Minute}}})
	if err != nil {
		return 0, err
	}
	if !d.Allowed {
		return max(d.RetryAfter, time.Millisecond), nil
	}
	return 0, nil
}

func requestID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// bearer is the token in the one Authorization header, if it is Bearer.
func bearer(ctx huma.Context) (string, bool) {
	var values []string
	ctx.EachHeader(func(name, value string) {
		if strings.EqualFold(name, "Authorization") {
			values = append(values, value)
		}
	})
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func remoteHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
