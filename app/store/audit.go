package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/app/db"
)

// The actions the store writes to the audit log. Every writer uses one of
// these; AuditActions lists them all, so that whoever reads the log (the
// console's sentences) can be checked against every one.
const (
	ActionTeamCreate        = "team.create"
	ActionTeamLimits        = "team.limits"
	ActionTeamOverBudget    = "team.over_budget"
	ActionMemberAdd         = "member.add"
	ActionMemberStatus      = "member.status"
	ActionMemberRole        = "member.role"
	ActionMemberRemove      = "member.remove"
	ActionMemberLimits      = "member.limits"
	ActionMemberPassword    = "member.password"
	ActionRouteAdd          = "route.add"
	ActionRouteUpdate       = "route.update"
	ActionRouteTargetAdd    = "route.target.add"
	ActionRouteTargetRemove = "route.target.remove"
	ActionRouteResilience   = "route.resilience"
	ActionRouteDelete       = "route.delete"
	ActionKeyIssue          = "key.issue"
	ActionKeyRotate         = "key.rotate"
	ActionKeyRevoke         = "key.revoke"
	ActionPriceSet          = "price.set"
	ActionInviteCreate      = "invite.create"
	ActionInviteRevoke      = "invite.revoke"
	ActionInviteReissue     = "invite.reissue"
	ActionSetupLink         = "setup.link"
	ActionAdminTokenCreate  = "admin_token.create"
	ActionAdminTokenRevoke  = "admin_token.revoke"
	ActionTeamSSO           = "team.sso"
	ActionPasswordSignIn    = "team.password_sign_in"
	ActionTierCreate        = "tier.create"
	ActionTierUpdate        = "tier.update"
	ActionTierDelete        = "tier.delete"
	ActionMemberTier        = "member.tier"
	ActionTeamDefaultTier   = "team.default_tier"
	ActionBudgetRequest     = "budget.request"
	ActionBudgetApprove     = "budget.approve"
	ActionBudgetAutoApprove = "budget.auto_approve"
	ActionBudgetDecline     = "budget.decline"
)

// AuditActions is every action the store writes, in the order a filter lists them.
func AuditActions() []string {
	return []string{ActionMemberStatus, ActionMemberRemove, ActionMemberRole, ActionMemberLimits, ActionTeamLimits, ActionKeyIssue, ActionKeyRotate,
		ActionKeyRevoke, ActionMemberAdd, ActionInviteCreate, ActionInviteRevoke, ActionInviteReissue, ActionMemberPassword, ActionRouteAdd,
		ActionRouteUpdate, ActionRouteTargetAdd, ActionRouteTargetRemove, ActionRouteResilience, ActionRouteDelete, ActionPriceSet, ActionTeamCreate,
		ActionSetupLink, ActionAdminTokenCreate, ActionAdminTokenRevoke, ActionTeamSSO, ActionPasswordSignIn,
		ActionTierCreate, ActionTierUpdate, ActionTierDelete, ActionMemberTier, ActionTeamDefaultTier, ActionBudgetRequest, ActionBudgetApprove,
		ActionBudgetAutoApprove, ActionBudgetDecline, ActionTeamOverBudget, ActionWebhookCreate, ActionWebhookDelete}
}

// AuditEntry is one recorded state change.
type AuditEntry struct {
	ID     int64           `json:"id"`
	TeamID *int64          `json:"team_id,omitempty"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	At     time.Time       `json:"at"`
}

// AuditFilter picks audit entries; zero fields pick everything.
type AuditFilter struct {
	TeamID *int64
	Action string
	// Member picks what a member did, what was done to them, and what was done
	// to their keys.
	Member *Member
	// BeforeID pages: only entries older than this one (their ids are lower).
	BeforeID int64
	Limit    int32
}

// Audit lists the newest entries, for one team or (teamID nil) all.
func (s *Store) Audit(ctx context.Context, teamID *int64, limit int32) ([]AuditEntry, error) {
	return s.AuditFiltered(ctx, AuditFilter{TeamID: teamID, Limit: limit})
}

// AuditFiltered lists the newest entries f picks, newest first.
func (s *Store) AuditFiltered(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	p := db.AuditLogListParams{TeamID: f.TeamID, MaxRows: f.Limit}
	if f.Action != "" {
		p.Action = &f.Action
	}
	if f.Member != nil {
		actor, id := string(MemberActor(f.Member.ID)), strconv.FormatInt(f.Member.ID, 10)
		p.MemberActor, p.MemberEmail, p.MemberID = &actor, &f.Member.Email, &id
	}
	if f.BeforeID > 0 {
		p.BeforeID = &f.BeforeID
	}
	rows, err := s.q.AuditLogList(ctx, s.pool, p)
	if err != nil {
		return nil, fmt.Errorf("store: list audit log: %w", err)
	}
	return auditEntries(rows), nil
}

// AuditPage lists up to limit of a team's entries older than beforeID (nil:
// the newest), newest first.
func (s *Store) AuditPage(ctx context.Context, teamID int64, beforeID *int64, limit int32) ([]AuditEntry, error) {
	rows, err := s.q.AuditLogPage(ctx, s.pool, db.AuditLogPageParams{TeamID: &teamID, BeforeID: beforeID, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("store: audit page: %w", err)
	}
	return auditEntries(rows), nil
}

func auditEntries(rows []db.AuditLog) []AuditEntry {
	entries := make([]AuditEntry, len(rows))
	for i, r := range rows {
		entries[i] = AuditEntry{ID: r.ID, TeamID: r.TeamID, Actor: r.Actor, Action: r.Action, Target: r.Target,
			Before: r.Before, After: r.After, At: r.At}
	}
	return entries
}
