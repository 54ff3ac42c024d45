package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

// AdmissionFailedMsg and SettleFailedMsg are the messages of the error lines for
// a limiter call that failed. A Redis outage repeats them for every request, so
// the app folds their bursts (observe.DefaultFold).
const (
	AdmissionFailedMsg = "admission failed"
	SettleFailedMsg    = "settle failed after every retry; the hold stays until its lease ends and is then charged in full"
)

// memberSettleWait bounds how long a member's paid admission waits for the
// member's earlier settles (settles.claim). Longer waits showed up as
// admissions over 100 ms for a member with many streams at 1000 req/s.
const memberSettleWait = 25 * time.Millisecond

// admit runs the one admission call for a request (rebuilding the team's
// counters first if Redis lost them) and writes its rate-limit and budget
// headers. On refusal it answers the caller and returns false.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, d Dialect, member Member, team Team, t *target) (limiter.Decision, bool) {
	req := limiter.Request{
		Team:         t.team(),
		Member:       t.member(),
		KeyID:        t.key.ID,
		RequestID:    t.requestID,
		MemberPolicy: member.Limits,
		TeamPolicy:   team.Limits,
		Lease:        g.opts.Lease,
		FailOpen:     t.route.FailOpen,
		Hold:         t.meter.hold,
		Tokens:       t.meter.tokens,
		QueueWait:    g.opts.QueueWait,
		Weight:       member.Weight,
	}
	if member.FitHolds {
		req.FitFloor = t.meter.fitFloor()
	}
	var earlier []*settleJob
	if req.Hold > 0 || req.Tokens > 0 {
		req.Meta = holdMeta(t)
		// Settles normally land within a millisecond; a Redis too slow for that
		// leaves the earlier holds in place, which this admission counts.
		earlier = g.settles.claim(r.Context(), req.Team, req.Member, memberSettleWait)
	}
	dec, errs, err := g.opts.Limiter.AdmitAfter(r.Context(), settlements(earlier), req)
	g.settles.finish(earlier, errs)
	if err == nil && dec.Reason == limiter.ReasonRebuild {
		if err = g.rebuild(r.Context(), t.key.TeamID); err == nil {
			dec, err = g.opts.Limiter.Admit(r.Context(), req)
		}
	}
	if err == nil && dec.Reason == limiter.ReasonQueued {
		dec, err = g.wait(r.Context(), req, dec, t)
		if !dec.Allowed {
			// An admitted request's answer says so with any wait for its provider (setQueued).
			w.Header().Set(QueuedHeader, strconv.FormatInt(max(1, ceilMillis(t.queued)), 10))
		}
	}
	if err != nil {
		g.opts.Logger.LogAttrs(r.Context(), slog.LevelError, AdmissionFailedMsg, slog.String("request_id", t.requestID),
			slog.Any("err", err), slog.Bool("fail_open", t.route.FailOpen), slog.Bool("allowed", dec.Allowed))
	}
	if len(dec.Expired) > 0 {
		g.recordExpired(t.key.TeamID, dec.Expired, dec.TeamEpoch)
	}
	setRateHeaders(w.Header(), dec)
	if dec.BudgetRemaining >= 0 {
		w.Header().Set("X-Budget-Remaining-Micros", strconv.FormatInt(dec.BudgetRemaining, 10))
	}
	if dec.Allowed && dec.Fitted > 0 {
		asked := t.meter.outCap
		lowered, err := t.meter.fit(r, dec.Fitted)
		if err != nil {
			// The body parsed as JSON a moment ago, so this is a bug: give the hold back.
			g.settles.add(context.WithoutCancel(r.Context()), limiter.Settlement{Team: req.Team, Member: req.Member,
				RequestID: req.RequestID, Epoch: dec.Epoch})
			WriteError(w, d, &Error{Kind: KindInvalidRequest, Message: "could not lower the output cap: " + err.Error()})
			return limiter.Decision{}, false
		}
		w.Header().Set(MaxTokensHeader, fmt.Sprintf("lowered from %d to %d to fit the budget left", asked, lowered))
	}
	if dec.Allowed {
		t.settles = req.Settles()
		if !dec.At.IsZero() {
			// The ledger files the request under the instant the limiter charged it:
			// a rebuild sums each budget period by created_at, so a replica whose
			// clock is off near midnight must not file it under another day.
			t.start = dec.At
		}
		return dec, true
	}
	switch dec.Reason {
	case limiter.ReasonRevoked:
		WriteError(w, d, &Error{Kind: KindAuthentication, Message: "this API key has been revoked"})
	case limiter.ReasonCutOff:
		WriteError(w, d, errMemberDisabled)
	case limiter.ReasonBudget:
		if !dec.TooLarge && !dec.BudgetResetsAt.IsZero() {
			// The budget comes back with its period; a total budget never does.
			setRetryHeaders(w.Header(), dec.BudgetResetsAt.Sub(g.opts.Now()))
		}
		WriteError(w, d, budgetRefusal(dec, &t.meter, budgetLimit(dec.BudgetScope, member, team), req.FitFloor > 0))
	case limiter.ReasonTPM:
		if dec.TooLarge {
			WriteError(w, d, &Error{Kind: KindInvalidRequest, Message: fmt.Sprintf(
				"this request may use up to %d tokens, more than the limit of %d tokens per minute; lower max_tokens", t.meter.tokens, dec.Limit)})
			break
		}
		setRetryHeaders(w.Header(), dec.RetryAfter)
		WriteError(w, d, &Error{Kind: KindRateLimit, Message: fmt.Sprintf("%s tokens-per-minute limit is reached; retry after %d ms",
			whose(dec.Scope), ceilMillis(dec.RetryAfter))})
	case limiter.ReasonRate, limiter.ReasonConcurrency:
		setRetryHeaders(w.Header(), dec.RetryAfter)
		what := "rate limit"
		if dec.Reason == limiter.ReasonConcurrency {
			what = "limit on requests in flight"
		}
		WriteError(w, d, &Error{Kind: KindRateLimit, Message: fmt.Sprintf("%s %s is reached; retry after %d ms",
			whose(dec.Scope), what, ceilMillis(dec.RetryAfter))})
	case limiter.ReasonQueued:
		setRetryHeaders(w.Header(), time.Second)
		WriteError(w, d, &Error{Kind: KindRateLimit, Message: fmt.Sprintf(
			"your team's limits are fully used: waited %d ms for a fair turn among its members (FAIR_QUEUE_WAIT); retry shortly",
			ceilMillis(t.queued))})
	default: // unavailable, or a rebuild that could not be done
		w.Header().Set("Retry-After", "1")
		WriteError(w, d, &Error{Kind: KindUnavailable, Message: "the gateway cannot check limits right now; retry shortly"})
	}
	return dec, false
}

// wait keeps a request in its team's waiting room, coming back to the limiter
// when it says, until it is admitted or refused, its wait budget (QueueWait)
// runs out, or its caller goes away. Whichever ends it but an admission or a
// refusal takes its ticket out of the room, so the next waiter's turn comes at
// once rather than when the ticket's lease ends. It returns the last decision:
// ReasonQueued when the budget ran out or the caller left.
func (g *Gateway) wait(ctx context.Context, req limiter.Request, dec limiter.Decision, t *target) (limiter.Decision, error) {
	began := time.Now()
	deadline := began.Add(req.QueueWait)
	g.observeQueue(t, 1)
	defer func() {
		t.queued = time.Since(began)
		g.observeQueue(t, -1)
	}()
	req.Queued = true
	for dec.Reason == limiter.ReasonQueued {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if !sleepCtx(ctx, min(dec.RetryAfter, left)) {
			g.leave(ctx, req)
			return dec, nil
		}
		req.QueueWait = max(time.Until(deadline), time.Microsecond)
		var err error
		if dec, err = g.opts.Limiter.Admit(ctx, req); err != nil {
			g.leave(ctx, req)
			return dec, err
		}
	}
	if dec.Reason == limiter.ReasonQueued {
		g.leave(ctx, req)
	}
	return dec, nil
}

// leave takes req's ticket out of the waiting room, also after its caller went.
func (g *Gateway) leave(ctx context.Context, req limiter.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := g.opts.Limiter.Leave(ctx, req.Team, req.RequestID); err != nil {
		// Its lease ends the ticket shortly anyway.
		g.opts.Logger.LogAttrs(ctx, slog.LevelWarn, "leaving the waiting room failed", slog.String("request_id", req.RequestID),
			slog.Any("err", err))
	}
}

func (g *Gateway) observeQueue(t *target, delta int) {
	for _, obs := range g.opts.Observers {
		if q, ok := obs.(QueueObserver); ok {
			q.Queued(t.key.TeamID, t.key.MemberID, delta)
		}
	}
}

// MaxTokensHeader tells the caller its output cap was lowered to fit its budget.
const MaxTokensHeader = "X-Tollgate-Max-Tokens"

// budgetLimit is the limit of the budget a refusal names.
func budgetLimit(s limiter.Scope, member Member, team Team) int64 {
	p := member.Limits
	if s == limiter.ScopeTeam {
		p = team.Limits
	}
	if p.Budget == nil {
		return 0
	}
	return p.Budget.Limit
}

func whose(s limiter.Scope) string {
	if s == limiter.ScopeTeam {
		return "your team's"
	}
	return "your"
}

// rebuild restores a team's counters from the durable ledger after Redis lost
// them, so losing Redis never resets anyone's spend.
func (g *Gateway) rebuild(ctx context.Context, teamID int64) error {
	if g.opts.Rebuild == nil {
		return fmt.Errorf("proxy: team %d: Redis lost its counters and no rebuild is configured", teamID)
	}
	state, err := g.opts.Rebuild(ctx, teamID)
	if err != nil {
		return fmt.Errorf("proxy: rebuild team %d: %w", teamID, err)
	}
	return g.opts.Limiter.Rebuild(ctx, strconv.FormatInt(teamID, 10), state)
}

// setRateHeaders reports the tightest rate limit, when there is one.
func setRateHeaders(h http.Header, d limiter.Decision) {
	if d.Limit == 0 || d.Reason == limiter.ReasonConcurrency || d.Reason == limiter.ReasonTPM {
		return
	}
	// Assigned in canonical form (what Set would store), which skips
	// canonicalising names that are not already canonical on every request.
	h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(d.Limit, 10)}
	h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(d.Remaining, 10)}
	h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(ceilSeconds(d.Reset), 10)}
}

// setRetryHeaders writes both forms the official SDKs read: Retry-After in whole
// seconds (never 0, which some clients treat as "now") and retry-after-ms.
func setRetryHeaders(h http.Header, after time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(after)), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(1, ceilMillis(after)), 10))
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
func ceilMillis(d time.Duration) int64  { return int64((d + time.Millisecond - 1) / time.Millisecond) }
