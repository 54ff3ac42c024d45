package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/argon2"

	"github.com/tollgate/tollgate/app/db"
)

// ErrBadCredentials is the one answer to a failed sign-in, whether the email is
// unknown, has no password yet or the password is wrong, so a caller cannot
// learn which accounts exist.
var ErrBadCredentials = errors.New("email or password is wrong")

// Lifetimes of one-time links.
const (
	SetupLinkTTL  = 24 * time.Hour
	InviteLinkTTL = 72 * time.Hour
)

// Password length bounds: long enough to resist guessing, short enough that
// hashing a submitted password costs a bounded amount of work.
const (
	PasswordMinLen = 12
	PasswordMaxLen = 256
)

// Actors of changes made through one-time links, before a session exists.
const (
	ActorSetupLink  Actor = "setup-link"
	ActorInviteLink Actor = "invite-link"
)

// MemberActor is the audit actor for a signed-in member.
func MemberActor(memberID int64) Actor { return Actor(fmt.Sprintf("member:%d", memberID)) }

// Invite is a pending one-time link. TeamID is nil for a first-run setup link.
type Invite struct {
	TeamID    *int64    `json:"team_id,omitempty"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	ExpiresAt time.Time `json:"expires_at"`
	tierID    *int64    // the tier the invitee lands in; nil: none
}

func inviteFrom(i db.Invite) Invite {
	return Invite{TeamID: i.TeamID, Email: i.Email, Role: i.Role, ExpiresAt: i.ExpiresAt, tierID: i.TierID}
}

// newLinkToken returns a random link token and the SHA-256 that is stored. A
// fast hash is right: the token has 256 random bits, nothing to brute-force.
func newLinkToken() (token string, hash []byte) {
	b := make([]byte, 32)
	rand.Read(b)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, linkHash(token)
}

func linkHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// ErrSetupDone refuses a setup link once the deployment has an owner: setup
// links make the first team only, so a link read from an old start log is
// worthless. Further teams are made by the operator, their owners invited.
var ErrSetupDone = errors.New("this gateway already has an owner, so setup links no longer work; " +
	"an owner of a further team joins through an invite (tollgate admin invite --role owner)")

// CreateSetupLink makes a first-run link that creates a team and its owner. It
// returns the token, which exists nowhere else: only its hash is stored. Once
// an owner exists it is ErrSetupDone.
func (s *Store) CreateSetupLink(ctx context.Context, actor Actor) (string, Invite, error) {
	token, hash := newLinkToken()
	var inv Invite
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if done, err := s.q.MemberAnyOwner(ctx, tx); err != nil || done {
			return cmp.Or(err, ErrSetupDone)
		}
		row, err := s.q.InviteCreate(ctx, tx, db.InviteCreateParams{TokenHash: hash, Role: RoleOwner,
			ExpiresAt: time.Now().Add(SetupLinkTTL)})
		if err != nil {
			return mapErr(err)
		}
		inv = inviteFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{action: ActionSetupLink, after: inv})
	})
	if err != nil {
		return "", Invite{}, fmt.Errorf("store: create setup link: %w", err)
	}
	return token, inv, nil
}

// CreateInvite makes a one-time link for email to join a team with role, in
// the team's default tier. The email must not have an account yet, unless it
// is a member of this team who has no password (added by the CLI): the invite
// then sets their password, and they keep their tier.
func (s *Store) CreateInvite(ctx context.Context, actor Actor, teamID int64, email, role string) (string, Invite, error) {
	return s.CreateInviteInTier(ctx, actor, teamID, email, role, TierDefault)
}

// CreateInviteInTier is CreateInvite with the tier the invitee lands in: a
// tier's name, TierDefault or TierNone. The choice is made now: a later change
// of the team's default tier does not move a pending invite.
func (s *Store) CreateInviteInTier(ctx context.Context, actor Actor, teamID int64, email, role, tier string) (string, Invite, error) {
	email, err := checkMember(email, role)
	if err != nil {
		return "", Invite{}, err
	}
	token, hash := newLinkToken()
	var inv Invite
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		existing, err := s.q.MemberGetForSignIn(ctx, tx, email)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case existing.TeamID != teamID || existing.PasswordHash != nil:
			return invalid("email", "%s already has an account on this gateway", email)
		}
		tierID, err := s.tierChoice(ctx, tx, teamID, tier)
		if err != nil {
			return err
		}
		if inv, err = s.createInvite(ctx, tx, hash, teamID, email, role, tierID); err != nil {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionInviteCreate, target: email, after: inv})
	})
	if err != nil {
		return "", Invite{}, fmt.Errorf("store: invite %s: %w", email, err)
	}
	return token, inv, nil
}

func (s *Store) createInvite(ctx context.Context, tx pgx.Tx, hash []byte, teamID int64, email, role string, tierID *int64) (Invite, error) {
	row, err := s.q.InviteCreate(ctx, tx, db.InviteCreateParams{TokenHash: hash, TeamID: &teamID, Email: email,
		Role: role, ExpiresAt: time.Now().Add(InviteLinkTTL), TierID: tierID})
	if err != nil {
		return Invite{}, mapErr(err)
	}
	return inviteFrom(row), nil
}

// RevokeInvites takes back email's pending invites to the team: their links
// stop working at once. ErrNotFound when there are none.
func (s *Store) RevokeInvites(ctx context.Context, actor Actor, teamID int64, email string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		revoked, err := s.revokeInvites(ctx, tx, teamID, email)
		if err != nil {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionInviteRevoke, target: email, before: revoked})
	})
	if err != nil {
		return fmt.Errorf("store: revoke invites of %s: %w", email, err)
	}
	return nil
}

// ReissueInvite replaces email's pending invites to the team with one new
// link, with the same role and a fresh expiry: for a link that was lost or is
// about to lapse. The old links stop working. ErrNotFound when none is pending.
func (s *Store) ReissueInvite(ctx context.Context, actor Actor, teamID int64, email string) (string, Invite, error) {
	token, hash := newLinkToken()
	var inv Invite
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		revoked, err := s.revokeInvites(ctx, tx, teamID, email)
		if err != nil {
			return err
		}
		if inv, err = s.createInvite(ctx, tx, hash, teamID, email, revoked[0].Role, revoked[0].tierID); err != nil {
			return err
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionInviteReissue, target: email, before: revoked, after: inv})
	})
	if err != nil {
		return "", Invite{}, fmt.Errorf("store: reissue invite of %s: %w", email, err)
	}
	return token, inv, nil
}

// revokeInvites deletes email's pending invites to the team, newest first.
func (s *Store) revokeInvites(ctx context.Context, tx pgx.Tx, teamID int64, email string) ([]Invite, error) {
	rows, err := s.q.InviteRevokePending(ctx, tx, db.InviteRevokePendingParams{TeamID: &teamID, Email: email})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	slices.SortFunc(rows, func(a, b db.Invite) int { return b.CreatedAt.Compare(a.CreatedAt) })
	invites := make([]Invite, len(rows))
	for i, r := range rows {
		invites[i] = inviteFrom(r)
	}
	return invites, nil
}

// PendingInvite looks up a link that can still be used; a used, expired or
// unknown token is ErrNotFound.
func (s *Store) PendingInvite(ctx context.Context, token string) (Invite, error) {
	row, err := s.q.InviteGetPending(ctx, s.pool, linkHash(token))
	if err != nil {
		return Invite{}, fmt.Errorf("store: invite: %w", mapErr(err))
	}
	return inviteFrom(row), nil
}

// PendingInvites lists a team's invites not yet used or expired.
func (s *Store) PendingInvites(ctx context.Context, teamID int64) ([]Invite, error) {
	rows, err := s.q.InviteListPending(ctx, s.pool, &teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list invites: %w", err)
	}
	invites := make([]Invite, len(rows))
	for i, r := range rows {
		invites[i] = inviteFrom(r)
	}
	return invites, nil
}

// PendingSetupLink is PendingInvite for a setup link: an invite's token is
// ErrNotFound, and any setup link, used, spent or not, is ErrSetupDone once an
// owner exists, so its holder learns why it stopped working.
func (s *Store) PendingSetupLink(ctx context.Context, token string) (Invite, error) {
	done, err := s.q.MemberAnyOwner(ctx, s.pool)
	if err != nil {
		return Invite{}, fmt.Errorf("store: setup link: %w", err)
	}
	if done {
		if _, err := s.q.InviteGetSetup(ctx, s.pool, linkHash(token)); err != nil {
			return Invite{}, fmt.Errorf("store: setup link: %w", mapErr(err))
		}
		return Invite{}, fmt.Errorf("store: setup link: %w", ErrSetupDone)
	}
	inv, err := s.PendingInvite(ctx, token)
	if err == nil && inv.TeamID != nil {
		err = ErrNotFound // an invite, not a setup link
	}
	return inv, err
}

// CompleteSetup uses a setup link: it creates the team and its owner with a
// password, all or nothing, so a refused form leaves the link usable. It works
// only while the deployment has no owner, once across replicas: setups take an
// advisory lock for their transaction, so of two racing (on one link or two)
// the second waits, then finds the first's owner and is ErrSetupDone. The
// winner spends every other setup link.
func (s *Store) CompleteSetup(ctx context.Context, token, teamName, email, password string) (Member, error) {
	email, err := checkMember(email, RoleOwner)
	if err != nil {
		return Member{}, err
	}
	if err := checkTeamName(teamName); err != nil {
		return Member{}, err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return Member{}, err
	}
	var m Member
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.SetupLock(ctx, tx); err != nil {
			return err
		}
		if done, err := s.q.MemberAnyOwner(ctx, tx); err != nil || done {
			return cmp.Or(err, ErrSetupDone)
		}
		inv, err := s.q.InviteUse(ctx, tx, linkHash(token))
		if err != nil {
			return mapErr(err)
		}
		if inv.TeamID != nil {
			return ErrNotFound // an invite, not a setup link
		}
		team, err := s.createTeam(ctx, tx, ActorSetupLink, teamName)
		if err != nil {
			return err
		}
		tierID, err := s.tierChoice(ctx, tx, team.ID, TierDefault)
		if err != nil {
			return err
		}
		if m, err = s.addMember(ctx, tx, ActorSetupLink, team.ID, email, RoleOwner, tierID); err != nil {
			return err
		}
		if err := s.q.InviteUseAllSetup(ctx, tx); err != nil {
			return err
		}
		return s.setPassword(ctx, tx, ActorSetupLink, &m, hash)
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: setup: %w", err)
	}
	return m, nil
}

// AcceptInvite uses an invite link: it adds the member (or finds the one the
// CLI added) and sets their password, all or nothing. A team whose password
// sign-in is off is ErrPasswordSignInOff, the link left usable: its invites
// are completed through its provider (AcceptInviteSSO), or a password would
// bypass the provider and its MFA.
func (s *Store) AcceptInvite(ctx context.Context, token, password string) (Member, error) {
	hash, err := hashPassword(password)
	if err != nil {
		return Member{}, err
	}
	var m Member
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		inv, err := s.q.InviteUse(ctx, tx, linkHash(token))
		if err != nil {
			return mapErr(err)
		}
		if inv.TeamID == nil {
			return ErrNotFound // a setup link, not an invite
		}
		// Locked: password sign-in turned off meanwhile waits for this, or this for it.
		team, err := s.q.TeamLock(ctx, tx, *inv.TeamID)
		if err != nil {
			return err
		}
		if !team.PasswordSignIn {
			return ErrPasswordSignInOff
		}
		// Locked: two invites to one member accepted at once must not both set a password.
		row, err := s.q.MemberLockByEmail(ctx, tx, db.MemberLockByEmailParams{TeamID: *inv.TeamID, Email: inv.Email})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if m, err = s.addMember(ctx, tx, ActorInviteLink, *inv.TeamID, inv.Email, inv.Role, inv.TierID); err != nil {
				return err
			}
		case err != nil:
			return err
		case row.PasswordHash != nil:
			return stale("%s already set a password through another invite; sign in instead", inv.Email)
		default:
			m = memberFrom(row)
		}
		return s.setPassword(ctx, tx, ActorInviteLink, &m, hash)
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: accept invite: %w", err)
	}
	return m, nil
}

// setPassword sets the password of a member who has just chosen it on a setup
// or invite link. The console signs them in with it there and then, so it is
// also how they last signed in: they may never use the sign-in form.
func (s *Store) setPassword(ctx context.Context, tx pgx.Tx, actor Actor, m *Member, hash string) error {
	err := s.q.MemberSetPassword(ctx, tx, db.MemberSetPasswordParams{TeamID: m.TeamID, ID: m.ID, PasswordHash: &hash})
	if err != nil {
		return err
	}
	m.SignInMethod = SignInPassword
	err = s.q.MemberSetSignInMethod(ctx, tx, db.MemberSetSignInMethodParams{TeamID: m.TeamID, ID: m.ID, SignInMethod: &m.SignInMethod})
	if err != nil {
		return err
	}
	return s.audit(ctx, tx, actor, auditEntry{teamID: &m.TeamID, action: ActionMemberPassword, target: m.Email})
}

// SignIn checks an email and password. Every failure is ErrBadCredentials and
// costs one password hash, so neither the answer nor its timing tells whether
// the account exists.
func (s *Store) SignIn(ctx context.Context, email, password string) (Member, error) {
	row, err := s.q.MemberGetForSignIn(ctx, s.pool, strings.ToLower(strings.TrimSpace(email)))
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Member{}, fmt.Errorf("store: sign in: %w", err)
	}
	found := err == nil && row.PasswordHash != nil
	stored := decoyPasswordHash()
	if found {
		stored = *row.PasswordHash
	}
	if !checkPassword(stored, password) || !found {
		return Member{}, ErrBadCredentials
	}
	// Only now, with the password right, may the answer say more.
	team, err := s.q.TeamGetByID(ctx, s.pool, row.TeamID)
	if err != nil {
		return Member{}, fmt.Errorf("store: sign in: %w", err)
	}
	if !team.PasswordSignIn {
		return Member{}, ErrPasswordSignInOff
	}
	method := SignInPassword
	if err := s.q.MemberSetSignInMethod(ctx, s.pool, db.MemberSetSignInMethodParams{TeamID: row.TeamID, ID: row.ID, SignInMethod: &method}); err != nil {
		return Member{}, fmt.Errorf("store: sign in: %w", err)
	}
	m := memberFrom(row)
	m.SignInMethod = method
	return m, nil
}

// AnyCanSignIn reports whether some member has a password, i.e. whether the
// deployment is past its first run.
func (s *Store) AnyCanSignIn(ctx context.Context) (bool, error) {
	ok, err := s.q.MemberAnyCanSignIn(ctx, s.pool)
	if err != nil {
		return false, fmt.Errorf("store: find members with passwords: %w", err)
	}
	return ok, nil
}

// DeleteExpiredSessions removes console sessions past their expiry.
func (s *Store) DeleteExpiredSessions(ctx context.Context) error {
	if err := s.q.SessionDeleteExpired(ctx, s.pool); err != nil {
		return fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return nil
}

// argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes, 1 lane).
// They are written into each hash, so raising them later keeps old hashes valid.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
)

// hashPassword returns an argon2id hash in the PHC string format.
func hashPassword(password string) (string, error) {
	if n := len([]rune(password)); n < PasswordMinLen || len(password) > PasswordMaxLen {
		return "", invalid("password", "password must be %d to %d characters", PasswordMinLen, PasswordMaxLen)
	}
	salt := make([]byte, 16)
	rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword compares password with a PHC-format argon2id hash in constant time.
func checkPassword(encoded, password string) bool {
	if len(password) > PasswordMaxLen {
		return false
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false
	}
	var memory, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// decoyPasswordHash is hashed against when there is no real hash, so an
// unknown email takes as long as a wrong password.
var decoyPasswordHash = sync.OnceValue(func() string {
	h, _ := hashPassword(rand.Text())
	return h
})
