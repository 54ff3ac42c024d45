package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Statuses of a budget request.
const (
	RequestPending  = "pending"
	RequestApproved = "approved"
	RequestDeclined = "declined"
)

// MaxBudgetRequest bounds one request ($100,000), so that a budget with its
// grants stays far inside what the limiter's integer math takes.
const MaxBudgetRequest = 100_000_000_000

// MaxPendingRequests is how many undecided requests a member may have at once.
const MaxPendingRequests = 5

// maxRequestText bounds a reason or a note, in characters (the schema checks it too).
const maxRequestText = 500

// BudgetRequest is a member asking for more budget, and the answer.
type BudgetRequest struct {
	ID           int64      `json:"id"`
	TeamID       int64      `json:"team_id"`
	MemberID     int64      `json:"member_id"`
	Email        string     `json:"email,omitempty"` // set by PendingBudgetRequests
	Amount       int64      `json:"amount_micros"`
	Reason       string     `json:"reason"`
	Status       string     `json:"status"`
	AutoApproved bool       `json:"auto_approved"`
	Period       string     `json:"budget_period,omitempty"` // of an approved request: the period it raised
	PeriodStart  *time.Time `json:"period_start,omitempty"`
	DecidedBy    string     `json:"decided_by,omitempty"`
	DecidedAt    *time.Time `json:"decided_at,omitempty"`
	Note         string     `json:"note,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
}

func budgetRequestFrom(r db.BudgetRequest) BudgetRequest {
	b := BudgetRequest{ID: r.ID, TeamID: r.TeamID, MemberID: r.MemberID, Amount: r.AmountMicros, Reason: r.Reason, Status: r.Status,
		AutoApproved: r.AutoApproved, PeriodStart: r.PeriodStart, DecidedAt: r.DecidedAt, Note: r.Note, CreatedAt: r.CreatedAt}
	if r.BudgetPeriod != nil {
		b.Period = *r.BudgetPeriod
	}
	if r.DecidedBy != nil {
		b.DecidedBy = *r.DecidedBy
	}
	return b
}

// checkRequestText refuses what checkText does, and empty (when required) or
// overlong text. It returns the text trimmed.
func checkRequestText(field, what, s string, required bool) (string, error) {
	s = strings.TrimSpace(s)
	if err := checkText(field, what, s); err != nil {
		return "", err
	}
	if required && s == "" {
		return "", invalid(field, "say why: %s is required", what)
	}
	if utf8.RuneCountInString(s) > maxRequestText {
		return "", invalid(field, "%s must be at most %d characters", what, maxRequestText)
	}
	return s, nil
}

// RequestBudget records a member's request for amount more micro-dollars of
// budget in the current period. When the member's tier auto-approves it (the
// member's auto-approved grants this period, this one included, stay within
// the tier's ceiling), it is approved at once; otherwise it waits for an owner.
func (s *Store) RequestBudget(ctx context.Context, actor Actor, teamID, memberID, amount int64, reason string) (BudgetRequest, error) {
	if amount <= 0 || amount > MaxBudgetRequest {
		return BudgetRequest{}, invalid("amount_micros", "amount must be more than $0 and at most $%s", FormatDollars(MaxBudgetRequest))
	}
	reason, err := checkRequestText("reason", "reason", reason, true)
	if err != nil {
		return BudgetRequest{}, err
	}
	var req BudgetRequest
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// The member's row serialises their requests: two at once cannot both
		// fit under the auto-approve ceiling or the pending cap.
		m, err := s.q.MemberLockByID(ctx, tx, db.MemberLockByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		if m.Status != StatusActive {
			return stale("%s is disabled", m.Email)
		}
		e, err := s.effective(ctx, tx, teamID, memberID)
		if err != nil {
			return err
		}
		if e.Limits.Budget == nil {
			return invalid("amount_micros", "%s has no budget limit to raise", m.Email)
		}
		pending, err := s.q.BudgetRequestPendingCount(ctx, tx, db.BudgetRequestPendingCountParams{TeamID: teamID, MemberID: memberID})
		if err != nil {
			return err
		}
		if pending >= MaxPendingRequests {
			return stale("%s already has %d requests waiting for an answer", m.Email, pending)
		}
		row, err := s.q.BudgetRequestCreate(ctx, tx, db.BudgetRequestCreateParams{TeamID: teamID, MemberID: memberID, AmountMicros: amount, Reason: reason})
		if err != nil {
			return mapErr(err)
		}
		req = budgetRequestFrom(row)
		if err := s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionBudgetRequest, target: m.Email, after: req}); err != nil {
			return err
		}
		if err := s.enqueue(ctx, tx, teamID, nil, NewEventID(), Event{Type: EventBudgetRequested,
			Text: fmt.Sprintf("tollgate: %s asks for $%s more budget: %s", m.Email, FormatDollars(amount), reason),
			Data: map[string]any{"request_id": req.ID, "member_id": memberID, "email": m.Email, "amount_micros": amount, "reason": reason}}); err != nil {
			return err
		}
		if m.TierID == nil {
			return nil
		}
		t, err := s.q.TierGetByID(ctx, tx, db.TierGetByIDParams{TeamID: teamID, ID: *m.TierID})
		if err != nil {
			return mapErr(err)
		}
		if t.AutoApproveMicros == 0 {
			return nil
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		start := PeriodStart(e.Limits.BudgetPeriod, now)
		auto, err := s.q.BudgetGrantSum(ctx, tx, db.BudgetGrantSumParams{TeamID: teamID, MemberID: memberID,
			BudgetPeriod: &e.Limits.BudgetPeriod, PeriodStart: &start, AutoOnly: true})
		if err != nil {
			return err
		}
		if auto+amount > t.AutoApproveMicros {
			return nil
		}
		req, err = s.grant(ctx, tx, Actor("auto:tier:"+t.Name), m, e, req, true, "")
		return err
	})
	if err != nil {
		return BudgetRequest{}, fmt.Errorf("store: request budget for member %d: %w", memberID, err)
	}
	return req, nil
}

// grant approves req inside the caller's transaction, with the member's row
// locked: the budget of the period the member is in now rises by req.Amount.
func (s *Store) grant(ctx context.Context, tx pgx.Tx, actor Actor, m db.Member, e Effective, req BudgetRequest, auto bool, note string) (BudgetRequest, error) {
	if e.Limits.Budget == nil {
		return req, stale("%s no longer has a budget limit to raise", m.Email)
	}
	raised := e.Limits
	raised.Budget = ptr(*e.Budget() + req.Amount)
	if *raised.Budget > MaxBudget {
		return req, invalid("amount_micros", "granting $%s would raise the budget past $%s, the most a budget may be",
			FormatDollars(req.Amount), FormatDollars(MaxBudget))
	}
	if _, err := raised.Policy(); err != nil {
		return req, err
	}
	now, err := txNow(ctx, tx)
	if err != nil {
		return req, err
	}
	row, err := s.q.BudgetRequestApprove(ctx, tx, db.BudgetRequestApproveParams{TeamID: req.TeamID, ID: req.ID, AutoApproved: auto,
		BudgetPeriod: &e.Limits.BudgetPeriod, PeriodStart: ptr(PeriodStart(e.Limits.BudgetPeriod, now)),
		DecidedBy: ptr(string(actor)), Note: note})
	if err != nil {
		return req, s.decided(ctx, tx, req, err)
	}
	before := req
	req = budgetRequestFrom(row)
	action := ActionBudgetApprove
	if auto {
		action = ActionBudgetAutoApprove
	}
	return req, s.audit(ctx, tx, actor, auditEntry{teamID: &req.TeamID, action: action, target: m.Email, before: before,
		after: map[string]any{"request": req, "budget_micros": *raised.Budget}})
}

// decided turns the no-row answer of a conditional decision into what
// happened: someone else decided first.
func (s *Store) decided(ctx context.Context, tx pgx.Tx, req BudgetRequest, err error) error {
	if err = mapErr(err); err != ErrNotFound {
		return err
	}
	now, getErr := s.q.BudgetRequestGet(ctx, tx, db.BudgetRequestGetParams{TeamID: req.TeamID, ID: req.ID})
	if getErr != nil {
		return mapErr(getErr)
	}
	return stale("budget request %d was already %s", req.ID, now.Status)
}

// ApproveBudgetRequest grants a pending request: the member's budget for the
// current period rises by exactly its amount on every replica at their next
// reload. Of two approvals at once, one wins and the other is a StateError; a
// member cannot decide their own request (a ForbiddenError).
func (s *Store) ApproveBudgetRequest(ctx context.Context, actor Actor, teamID, id int64, note string) (BudgetRequest, error) {
	return s.decide(ctx, actor, teamID, id, note, true)
}

// DeclineBudgetRequest answers a pending request no, with a note; nothing else changes.
func (s *Store) DeclineBudgetRequest(ctx context.Context, actor Actor, teamID, id int64, note string) (BudgetRequest, error) {
	return s.decide(ctx, actor, teamID, id, note, false)
}

func (s *Store) decide(ctx context.Context, actor Actor, teamID, id int64, note string, approve bool) (BudgetRequest, error) {
	note, err := checkRequestText("note", "note", note, false)
	if err != nil {
		return BudgetRequest{}, err
	}
	var req BudgetRequest
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.BudgetRequestLock(ctx, tx, db.BudgetRequestLockParams{TeamID: teamID, ID: id})
		if err != nil {
			return mapErr(err)
		}
		req = budgetRequestFrom(row)
		// Whatever carries the call (a session, a token they made), the
		// person who asked does not decide.
		if person, isPerson, err := s.person(ctx, tx, actor); err != nil {
			return err
		} else if isPerson && person == req.MemberID {
			return forbidden("you cannot decide your own budget request; another owner must")
		}
		if req.Status != RequestPending {
			return stale("budget request %d was already %s", id, req.Status)
		}
		m, err := s.q.MemberLockByID(ctx, tx, db.MemberLockByIDParams{TeamID: teamID, ID: req.MemberID})
		if err != nil {
			return mapErr(err)
		}
		if approve {
			e, err := s.effective(ctx, tx, teamID, req.MemberID)
			if err != nil {
				return err
			}
			req, err = s.grant(ctx, tx, actor, m, e, req, false, note)
			return err
		}
		row, err = s.q.BudgetRequestDecline(ctx, tx, db.BudgetRequestDeclineParams{TeamID: teamID, ID: id, DecidedBy: ptr(string(actor)), Note: note})
		if err != nil {
			return s.decided(ctx, tx, req, err)
		}
		before := req
		req = budgetRequestFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionBudgetDecline, target: m.Email, before: before, after: req})
	})
	if err != nil {
		return BudgetRequest{}, fmt.Errorf("store: decide budget request %d: %w", id, err)
	}
	return req, nil
}

// PendingBudgetRequests lists a team's undecided requests, oldest first.
func (s *Store) PendingBudgetRequests(ctx context.Context, teamID int64) ([]BudgetRequest, error) {
	rows, err := s.q.BudgetRequestListPending(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: pending budget requests: %w", err)
	}
	reqs := make([]BudgetRequest, len(rows))
	for i, r := range rows {
		reqs[i] = budgetRequestFrom(db.BudgetRequest{ID: r.ID, TeamID: r.TeamID, MemberID: r.MemberID, AmountMicros: r.AmountMicros,
			Reason: r.Reason, Status: r.Status, AutoApproved: r.AutoApproved, BudgetPeriod: r.BudgetPeriod, PeriodStart: r.PeriodStart,
			DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, Note: r.Note, CreatedAt: r.CreatedAt})
		reqs[i].Email = r.Email
	}
	return reqs, nil
}

// MemberBudgetRequests lists a member's newest requests and their answers.
func (s *Store) MemberBudgetRequests(ctx context.Context, teamID, memberID int64, limit int32) ([]BudgetRequest, error) {
	rows, err := s.q.BudgetRequestListByMember(ctx, s.pool, db.BudgetRequestListByMemberParams{TeamID: teamID, MemberID: memberID, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("store: member %d budget requests: %w", memberID, err)
	}
	reqs := make([]BudgetRequest, len(rows))
	for i, r := range rows {
		reqs[i] = budgetRequestFrom(r)
	}
	return reqs, nil
}
