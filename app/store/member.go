package store

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Roles and statuses of a member.
const (
	RoleOwner      = "owner"
	RoleMember     = "member"
	StatusActive   = "active"
	StatusDisabled = "disabled"
	// StatusRemoved is a member who left the team: kept for the ledger and the
	// audit log, refused everywhere, never restored.
	StatusRemoved = "removed"
)

// Member is a person in a team.
type Member struct {
	ID        int64     `json:"id"`
	TeamID    int64     `json:"team_id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// SignInMethod is how they last signed in to the console (SignInPassword,
	// SignInOIDC, SignInGitHub); "" if never.
	SignInMethod string `json:"sign_in_method,omitempty"`
	// Invited is a member with no way in yet: no password, never signed in.
	// An invite link (or their team's single sign-on) lets them in.
	Invited bool `json:"invited"`
	// SessionEpoch moves on at each cut-off and restore; a console session
	// signed in under an older epoch is over.
	SessionEpoch int64 `json:"-"`
}

// State is the member's state in a person's words: invited (no way in yet),
// active, cut off or removed.
func (m Member) State() string {
	switch {
	case m.Status == StatusActive && m.Invited:
		return "invited"
	case m.Status == StatusDisabled:
		return "cut off"
	}
	return m.Status
}

func memberFrom(m db.Member) Member {
	member := Member{ID: m.ID, TeamID: m.TeamID, Email: m.Email, Role: m.Role, Status: m.Status, CreatedAt: m.CreatedAt,
		SessionEpoch: m.SessionEpoch, Invited: m.PasswordHash == nil && m.SignInMethod == nil}
	if m.SignInMethod != nil {
		member.SignInMethod = *m.SignInMethod
	}
	return member
}

// AddMember adds a person to a team, in the team's default tier.
func (s *Store) AddMember(ctx context.Context, actor Actor, teamID int64, email, role string) (Member, error) {
	return s.AddMemberInTier(ctx, actor, teamID, email, role, TierDefault)
}

// AddMemberInTier adds a person to a team in the tier named tier, or in the
// team's default tier (TierDefault) or in none (TierNone).
func (s *Store) AddMemberInTier(ctx context.Context, actor Actor, teamID int64, email, role, tier string) (Member, error) {
	email, err := checkMember(email, role)
	if err != nil {
		return Member{}, err
	}
	var m Member
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tierID, err := s.tierChoice(ctx, tx, teamID, tier)
		if err != nil {
			return err
		}
		m, err = s.addMember(ctx, tx, actor, teamID, email, role, tierID)
		return err
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: add member %s: %w", email, err)
	}
	return m, nil
}

// AddMemberInvited adds a person to a team, in its default tier, with a
// one-time invite link that lets them set a password: a member added without
// one would have no way in. The link's token is returned once, with the invite.
func (s *Store) AddMemberInvited(ctx context.Context, actor Actor, teamID int64, email, role string) (Member, string, Invite, error) {
	email, err := checkMember(email, role)
	if err != nil {
		return Member{}, "", Invite{}, err
	}
	token, hash := newLinkToken()
	var (
		m   Member
		inv Invite
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tierID, err := s.tierChoice(ctx, tx, teamID, TierDefault)
		if err != nil {
			return err
		}
		if m, err = s.addMember(ctx, tx, actor, teamID, email, role, tierID); err != nil {
			return err
		}
		if inv, err = s.createInvite(ctx, tx, hash, teamID, email, role, tierID); err != nil {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionInviteCreate, target: email, after: inv})
	})
	if err != nil {
		return Member{}, "", Invite{}, fmt.Errorf("store: add member %s: %w", email, err)
	}
	return m, token, inv, nil
}

// checkMember validates a new member's email and role and returns the email as stored.
func checkMember(email, role string) (string, error) {
	if err := checkText("email", "email", email); err != nil {
		return "", err
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email {
		return "", invalid("email", "%q is not an email address", email)
	}
	if role != RoleOwner && role != RoleMember {
		return "", invalid("role", "role must be owner or member, not %q", role)
	}
	return strings.ToLower(email), nil
}

// addMember is AddMemberInTier, after checkMember and with the tier's id (nil:
// none), inside the caller's transaction (setup and invites add a member and
// set a password together).
func (s *Store) addMember(ctx context.Context, tx pgx.Tx, actor Actor, teamID int64, email, role string, tierID *int64) (Member, error) {
	row, err := s.q.MemberCreate(ctx, tx, db.MemberCreateParams{TeamID: teamID, Email: email, Role: role, TierID: tierID})
	if err != nil {
		return Member{}, mapErr(err)
	}
	m := memberFrom(row)
	tier, err := s.tierName(ctx, tx, teamID, tierID)
	if err != nil {
		return Member{}, err
	}
	return m, s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberAdd, target: email,
		after: struct {
			Member
			Tier string `json:"tier"`
		}{m, tier}})
}

// FindMember resolves a member of a team by email or numeric id.
func (s *Store) FindMember(ctx context.Context, teamID int64, ref string) (Member, error) {
	var (
		row db.Member
		err error
	)
	if id, convErr := strconv.ParseInt(ref, 10, 64); convErr == nil {
		row, err = s.q.MemberGetByID(ctx, s.pool, db.MemberGetByIDParams{TeamID: teamID, ID: id})
	} else {
		row, err = s.q.MemberGetByEmail(ctx, s.pool, db.MemberGetByEmailParams{TeamID: teamID, Email: strings.ToLower(ref)})
	}
	if err != nil {
		return Member{}, fmt.Errorf("store: member %q: %w", ref, mapErr(err))
	}
	return memberFrom(row), nil
}

// Members lists a team's members.
func (s *Store) Members(ctx context.Context, teamID int64) ([]Member, error) {
	rows, err := s.q.MemberList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list members: %w", err)
	}
	members := make([]Member, len(rows))
	for i, r := range rows {
		members[i] = memberFrom(r)
	}
	return members, nil
}

// SetMemberStatus cuts a member off (disabled) or restores them (active).
// Either way every console session they had ends; while cut off, every admin
// token of theirs is refused, and every replica refuses their keys at the next
// request (the mirror) or snapshot reload. Nobody changes their own status
// (a cut-off owner cannot restore themselves through any credential), and the
// team's last active owner cannot be cut off.
func (s *Store) SetMemberStatus(ctx context.Context, actor Actor, teamID, memberID int64, status string) (Member, error) {
	if status != StatusActive && status != StatusDisabled {
		return Member{}, invalid("status", "status must be active or disabled, not %q", status)
	}
	var m Member
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		owners, person, isPerson, err := s.lockOwners(ctx, tx, actor, teamID)
		if err != nil {
			return err
		}
		if isPerson && person == memberID {
			return forbidden("you cannot change your own status; another owner must")
		}
		before, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		if before.Status == StatusRemoved {
			return stale("%s was removed from the team; a removal is not undone", before.Email)
		}
		if status == StatusDisabled && lastOwner(before, owners) {
			return stale("%s is the team's last active owner and cannot be cut off; make another member an owner first", before.Email)
		}
		row, err := s.q.MemberSetStatus(ctx, tx, db.MemberSetStatusParams{TeamID: teamID, ID: memberID, Status: status})
		if err != nil {
			return mapErr(err)
		}
		m = memberFrom(row)
		if err := s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberStatus, target: m.Email,
			before: map[string]string{"status": before.Status}, after: map[string]string{"status": status}}); err != nil {
			return err
		}
		if status != StatusDisabled || before.Status == StatusDisabled {
			return nil
		}
		return s.enqueue(ctx, tx, teamID, nil, NewEventID(), Event{Type: EventMemberCutOff,
			Text: fmt.Sprintf("tollgate: %s was cut off by %s", m.Email, actor),
			Data: map[string]any{"member_id": memberID, "email": m.Email, "by": string(actor)}})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: set member %d status: %w", memberID, err)
	}
	s.mirrorCutOff(ctx, teamID, memberID, status == StatusDisabled)
	return m, nil
}

// SetMemberRole makes a member an owner or a member. Nobody changes their own
// role, and the team's last active owner cannot be demoted. A demoted owner's
// admin tokens stop at their next request: a team-wide read is more than a
// member may see, so they are refused, not narrowed to read.
func (s *Store) SetMemberRole(ctx context.Context, actor Actor, teamID, memberID int64, role string) (Member, error) {
	if role != RoleOwner && role != RoleMember {
		return Member{}, invalid("role", "role must be owner or member, not %q", role)
	}
	var m Member
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		owners, person, isPerson, err := s.lockOwners(ctx, tx, actor, teamID)
		if err != nil {
			return err
		}
		if isPerson && person == memberID {
			return forbidden("you cannot change your own role; another owner must")
		}
		before, err := s.q.MemberGetByID(ctx, tx, db.MemberGetByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		if before.Role == role {
			return stale("%s is already %s", before.Email, role)
		}
		if role == RoleMember && lastOwner(before, owners) {
			return stale("%s is the team's last active owner and cannot be demoted; make another member an owner first", before.Email)
		}
		row, err := s.q.MemberSetRole(ctx, tx, db.MemberSetRoleParams{TeamID: teamID, ID: memberID, Role: role})
		if err != nil {
			return mapErr(err)
		}
		m = memberFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberRole, target: m.Email,
			before: map[string]string{"role": before.Role}, after: map[string]string{"role": role}})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: set member %d role: %w", memberID, err)
	}
	return m, nil
}

// RemoveMember takes a member out of the team for good. Their row stays, so
// the ledger, their budget requests and the audit log still name them; but
// every key of theirs is revoked, their console sessions end (the session
// epoch moves on) and their admin tokens stop, on every replica at the next
// request, and their pending invites are taken back. Nobody removes
// themselves, and the team's last active owner cannot be removed.
func (s *Store) RemoveMember(ctx context.Context, actor Actor, teamID, memberID int64) (Member, error) {
	var (
		m       Member
		revoked []string
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		owners, person, isPerson, err := s.lockOwners(ctx, tx, actor, teamID)
		if err != nil {
			return err
		}
		if isPerson && person == memberID {
			return forbidden("you cannot remove yourself; another owner must")
		}
		before, err := s.q.MemberLockByID(ctx, tx, db.MemberLockByIDParams{TeamID: teamID, ID: memberID})
		if err != nil {
			return mapErr(err)
		}
		if before.Status == StatusRemoved {
			return stale("%s was already removed", before.Email)
		}
		if lastOwner(before, owners) {
			return stale("%s is the team's last active owner and cannot be removed; make another member an owner first", before.Email)
		}
		row, err := s.q.MemberSetStatus(ctx, tx, db.MemberSetStatusParams{TeamID: teamID, ID: memberID, Status: StatusRemoved})
		if err != nil {
			return mapErr(err)
		}
		m = memberFrom(row)
		if revoked, err = s.q.APIKeyRevokeByMember(ctx, tx, db.APIKeyRevokeByMemberParams{TeamID: teamID, MemberID: memberID}); err != nil {
			return err
		}
		if _, err := s.revokeInvites(ctx, tx, teamID, m.Email); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionMemberRemove, target: m.Email,
			before: map[string]string{"status": before.Status}, after: map[string]any{"status": StatusRemoved, "revoked_keys": revoked}})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: remove member %d: %w", memberID, err)
	}
	s.mirrorCutOff(ctx, teamID, memberID, true)
	for _, id := range revoked {
		s.mirrorKeyRevoked(ctx, teamID, id)
	}
	return m, nil
}
