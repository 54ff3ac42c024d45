package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Sign-in methods: how a member signed in, and the kinds of SSO method.
const (
	SignInPassword = "password"
	SignInOIDC     = "oidc"
	SignInGitHub   = "github"
)

// Join policies: who may join a team just-in-time through its SSO method.
const (
	JoinInvited = "invited" // only emails already in the team or with a pending invite
	JoinDomains = "domains" // any verified email of AllowedDomains
	JoinOrg     = "org"     // GitHub: any active member of AllowedOrg
)

// ErrPasswordSignInOff answers a right password for a member of a team that
// signs in only through SSO.
var ErrPasswordSignInOff = errors.New("this team signs in through single sign-on only")

// SignInRefusedError is an SSO sign-in the team does not accept; Reason says
// why, for the person signing in.
type SignInRefusedError struct{ Reason string }

func (e *SignInRefusedError) Error() string { return e.Reason }

func refuseSignIn(format string, args ...any) error {
	return &SignInRefusedError{Reason: fmt.Sprintf(format, args...)}
}

// SSOMethod is a team's "Sign in with …" configuration. Its client secret is
// not here: it is read from the environment variable SSOSecretEnv names.
type SSOMethod struct {
	TeamID         int64     `json:"team_id"`
	TeamName       string    `json:"team_name,omitempty"`
	Kind           string    `json:"kind"`
	DisplayName    string    `json:"display_name"`
	IssuerURL      string    `json:"issuer_url,omitempty"`
	ClientID       string    `json:"client_id"`
	JoinPolicy     string    `json:"join_policy"`
	AllowedDomains []string  `json:"allowed_domains,omitempty"`
	AllowedOrg     string    `json:"allowed_org,omitempty"`
	Enabled        bool      `json:"enabled"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func ssoMethodFrom(r db.TeamSso, teamName string) SSOMethod {
	return SSOMethod{TeamID: r.TeamID, TeamName: teamName, Kind: r.Kind, DisplayName: r.DisplayName, IssuerURL: r.IssuerUrl,
		ClientID: r.ClientID, JoinPolicy: r.JoinPolicy, AllowedDomains: r.AllowedDomains, AllowedOrg: r.AllowedOrg,
		Enabled: r.Enabled, UpdatedAt: r.UpdatedAt}
}

// SSOSecretEnv is the environment variable holding a team's client secret for
// kind. It is derived, not chosen, so an owner cannot have the gateway send
// another team's secret, or any other variable, to an issuer they control:
// team names have no underscore, so no two teams' names can collide.
func SSOSecretEnv(teamName, kind string) string {
	return "TOLLGATE_SSO_" + strings.ToUpper(strings.ReplaceAll(teamName, "-", "_")+"_"+kind) + "_SECRET"
}

var (
	domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	githubOrg  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,38})$`)
)

// checkSSOMethod validates a method and returns it as stored.
func checkSSOMethod(m SSOMethod) (SSOMethod, error) {
	if m.Kind != SignInOIDC && m.Kind != SignInGitHub {
		return m, invalid("kind", "sign-in method must be oidc or github, not %q", m.Kind)
	}
	m.DisplayName = strings.TrimSpace(m.DisplayName)
	if m.DisplayName == "" {
		m.DisplayName = map[string]string{SignInOIDC: "single sign-on", SignInGitHub: "GitHub"}[m.Kind]
	}
	if err := checkText("display_name", "button name", m.DisplayName); err != nil {
		return m, err
	}
	m.ClientID = strings.TrimSpace(m.ClientID)
	if m.ClientID == "" {
		return m, invalid("client_id", "client id is required")
	}
	if err := checkText("client_id", "client id", m.ClientID); err != nil {
		return m, err
	}
	if m.Kind == SignInOIDC {
		m.IssuerURL = strings.TrimSpace(m.IssuerURL)
		u, err := url.Parse(m.IssuerURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return m, invalid("issuer_url", "issuer must be an https URL without query, such as https://accounts.google.com")
		}
	} else {
		m.IssuerURL = ""
	}
	domains := m.AllowedDomains
	m.AllowedDomains = nil
	for _, d := range domains {
		d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@"))
		if d == "" {
			continue
		}
		if !domainName.MatchString(d) {
			return m, invalid("allowed_domains", "%q is not a domain name", d)
		}
		if !slices.Contains(m.AllowedDomains, d) {
			m.AllowedDomains = append(m.AllowedDomains, d)
		}
	}
	m.AllowedOrg = strings.TrimSpace(m.AllowedOrg)
	if m.AllowedOrg != "" && (m.Kind != SignInGitHub || !githubOrg.MatchString(m.AllowedOrg)) {
		return m, invalid("allowed_org", "an organisation is a GitHub organisation's login, and only for GitHub")
	}
	switch m.JoinPolicy {
	case JoinInvited:
	case JoinDomains:
		if len(m.AllowedDomains) == 0 {
			return m, invalid("allowed_domains", "name at least one email domain whose people may join")
		}
	case JoinOrg:
		if m.AllowedOrg == "" {
			return m, invalid("allowed_org", "name the GitHub organisation whose members may join")
		}
	default:
		return m, invalid("join_policy", "who may join must be invited, domains or org, not %q", m.JoinPolicy)
	}
	if m.JoinPolicy != JoinDomains {
		m.AllowedDomains = nil
	}
	if m.AllowedDomains == nil {
		m.AllowedDomains = []string{}
	}
	return m, nil
}

// SetSSOMethod creates or replaces a team's method of m.Kind. Disabling the
// last method of a team whose password sign-in is off is refused: nobody could
// sign in any more.
func (s *Store) SetSSOMethod(ctx context.Context, actor Actor, m SSOMethod) (SSOMethod, error) {
	m, err := checkSSOMethod(m)
	if err != nil {
		return SSOMethod{}, err
	}
	if m.Kind == SignInOIDC {
		if _, err := s.outbound.CheckURL(ctx, m.IssuerURL); err != nil {
			return SSOMethod{}, invalid("issuer_url", "issuer %v", err)
		}
	}
	var saved SSOMethod
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		team, err := s.q.TeamLock(ctx, tx, m.TeamID)
		if err != nil {
			return mapErr(err)
		}
		before, err := s.q.SSOGet(ctx, tx, db.SSOGetParams{TeamID: m.TeamID, Kind: m.Kind})
		var prior any
		switch {
		case err == nil:
			prior = ssoMethodFrom(before, "")
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		row, err := s.q.SSOUpsert(ctx, tx, db.SSOUpsertParams{TeamID: m.TeamID, Kind: m.Kind, DisplayName: m.DisplayName,
			IssuerUrl: m.IssuerURL, ClientID: m.ClientID, JoinPolicy: m.JoinPolicy, AllowedDomains: m.AllowedDomains,
			AllowedOrg: m.AllowedOrg, Enabled: m.Enabled})
		if err != nil {
			return mapErr(err)
		}
		if !team.PasswordSignIn {
			n, err := s.q.SSOCountEnabled(ctx, tx, m.TeamID)
			if err != nil {
				return err
			}
			if n == 0 {
				return stale("password sign-in is off, so the team's last single sign-on method cannot be disabled; turn password sign-in on first")
			}
		}
		saved = ssoMethodFrom(row, team.Name)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &m.TeamID, action: ActionTeamSSO, target: m.Kind, before: prior, after: saved})
	})
	if err != nil {
		return SSOMethod{}, fmt.Errorf("store: set %s sign-in: %w", m.Kind, err)
	}
	return saved, nil
}

// SSOMethods lists a team's methods, enabled or not.
func (s *Store) SSOMethods(ctx context.Context, teamID int64) ([]SSOMethod, error) {
	team, err := s.q.TeamGetByID(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: sign-in methods: %w", mapErr(err))
	}
	rows, err := s.q.SSOList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: sign-in methods: %w", err)
	}
	methods := make([]SSOMethod, len(rows))
	for i, r := range rows {
		methods[i] = ssoMethodFrom(r, team.Name)
	}
	return methods, nil
}

// EnabledSSOMethods lists every team's enabled methods, for the sign-in page.
func (s *Store) EnabledSSOMethods(ctx context.Context) ([]SSOMethod, error) {
	rows, err := s.q.SSOListEnabled(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("store: enabled sign-in methods: %w", err)
	}
	methods := make([]SSOMethod, len(rows))
	for i, r := range rows {
		methods[i] = ssoMethodFrom(r.TeamSso, r.TeamName)
	}
	return methods, nil
}

// EnabledSSOMethod is one team's enabled method of kind; a disabled or absent
// one is ErrNotFound.
func (s *Store) EnabledSSOMethod(ctx context.Context, teamName, kind string) (SSOMethod, error) {
	team, err := s.q.TeamGetByName(ctx, s.pool, teamName)
	if err != nil {
		return SSOMethod{}, fmt.Errorf("store: sign-in method: %w", mapErr(err))
	}
	row, err := s.q.SSOGet(ctx, s.pool, db.SSOGetParams{TeamID: team.ID, Kind: kind})
	if err == nil && !row.Enabled {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return SSOMethod{}, fmt.Errorf("store: sign-in method: %w", mapErr(err))
	}
	return ssoMethodFrom(row, team.Name), nil
}

// SetPasswordSignIn turns password sign-in on or off for a team. Off is
// refused unless an SSO method is enabled; the caller checks that it works.
func (s *Store) SetPasswordSignIn(ctx context.Context, actor Actor, teamID int64, on bool) (Team, error) {
	var t Team
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.TeamLock(ctx, tx, teamID)
		if err != nil {
			return mapErr(err)
		}
		if !on {
			n, err := s.q.SSOCountEnabled(ctx, tx, teamID)
			if err != nil {
				return err
			}
			if n == 0 {
				return stale("password sign-in cannot be turned off before a single sign-on method is enabled: nobody could sign in")
			}
		}
		row, err := s.q.TeamSetPasswordSignIn(ctx, tx, db.TeamSetPasswordSignInParams{ID: teamID, PasswordSignIn: on})
		if err != nil {
			return mapErr(err)
		}
		t = teamFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionPasswordSignIn, target: t.Name,
			before: map[string]bool{"password_sign_in": before.PasswordSignIn}, after: map[string]bool{"password_sign_in": on}})
	})
	if err != nil {
		return Team{}, fmt.Errorf("store: set password sign-in: %w", err)
	}
	return t, nil
}

// SSOIdentity is who a team's provider vouches for. Email must be verified
// by the provider; OrgMember is the GitHub organisation check's answer.
type SSOIdentity struct {
	Email     string
	OrgMember bool
}

// ActorSSO is the audit actor of a just-in-time join through kind.
func ActorSSO(kind string) Actor { return Actor("sso:" + kind) }

// SSOSignIn decides whether the person method's provider vouches for may
// sign in to its team, and returns the member: an existing active member of
// this team by email, or a new member (never an owner) if the team's join
// policy admits them. A cut-off member, a member of another team, a team with
// a GitHub organisation the person is not in, and a person the policy does not
// admit are SignInRefusedError.
func (s *Store) SSOSignIn(ctx context.Context, method SSOMethod, id SSOIdentity) (Member, error) {
	email := strings.ToLower(strings.TrimSpace(id.Email))
	if _, err := checkMember(email, RoleMember); err != nil {
		return Member{}, refuseSignIn("the provider's email address %q is not usable", id.Email)
	}
	if method.AllowedOrg != "" && !id.OrgMember {
		return Member{}, refuseSignIn("you are not an active member of the GitHub organisation %s", method.AllowedOrg)
	}
	var m Member
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.MemberGetForSignIn(ctx, tx, email)
		switch {
		case err == nil && row.TeamID != method.TeamID:
			return refuseSignIn("%s belongs to another team on this gateway", email)
		case err == nil && row.Status != StatusActive:
			return refuseSignIn("%s is cut off from team %s; an owner can restore access", email, method.TeamName)
		case err == nil:
			m = memberFrom(row)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		default:
			if err := s.admits(ctx, tx, method, email); err != nil {
				return err
			}
			tierID, err := s.tierChoice(ctx, tx, method.TeamID, TierDefault)
			if err != nil {
				return err
			}
			if m, err = s.addMember(ctx, tx, ActorSSO(method.Kind), method.TeamID, email, RoleMember, tierID); err != nil {
				return err
			}
			if err := s.q.InviteUseAllForEmail(ctx, tx, db.InviteUseAllForEmailParams{TeamID: &method.TeamID, Email: email}); err != nil {
				return err
			}
		}
		m.SignInMethod = method.Kind
		return s.q.MemberSetSignInMethod(ctx, tx, db.MemberSetSignInMethodParams{TeamID: m.TeamID, ID: m.ID, SignInMethod: &m.SignInMethod})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: %s sign-in: %w", method.Kind, err)
	}
	return m, nil
}

// admits applies the join policy to a person who is not yet a member. A
// pending owner's invite is refused under every policy: an owner is made only
// by accepting that link, and joining as a member would silently use it up.
func (s *Store) admits(ctx context.Context, tx pgx.Tx, method SSOMethod, email string) error {
	inv, err := s.q.InviteGetPendingByEmail(ctx, tx, db.InviteGetPendingByEmailParams{TeamID: &method.TeamID, Email: email})
	invited := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if invited && inv.Role == RoleOwner {
		return refuseSignIn("%s is invited as an owner; owners join through their invite link, never by single sign-on", email)
	}
	switch method.JoinPolicy {
	case JoinDomains:
		_, domain, _ := strings.Cut(email, "@")
		if !invited && !slices.Contains(method.AllowedDomains, domain) {
			return refuseSignIn("team %s does not admit addresses at %s; ask an owner for an invite", method.TeamName, domain)
		}
	case JoinOrg:
		// The organisation was checked before the transaction.
	default:
		if !invited {
			return refuseSignIn("team %s admits invited people only, and %s has no pending invite", method.TeamName, email)
		}
	}
	return nil
}

// InviteRef names an invite link without being it: the link's stored hash,
// which a single sign-on flow keeps in the session from its start to its
// callback, so sessions never hold a usable link.
func InviteRef(token string) string { return base64.RawURLEncoding.EncodeToString(linkHash(token)) }

// AcceptInviteSSO completes the invite ref names through method, a method of
// the invited team, for the person its provider vouches for: their verified
// email must be the invite's. It adds the member with the invite's role (or
// finds the one the CLI added), all or nothing, so a refusal leaves the link
// usable. An unknown, used or expired link, or one to another team, is
// ErrNotFound; a person the invite is not for is SignInRefusedError.
func (s *Store) AcceptInviteSSO(ctx context.Context, method SSOMethod, ref string, id SSOIdentity) (Member, error) {
	hash, err := base64.RawURLEncoding.DecodeString(ref)
	if err != nil {
		return Member{}, fmt.Errorf("store: %s invite: %w", method.Kind, ErrNotFound)
	}
	email := strings.ToLower(strings.TrimSpace(id.Email))
	if method.AllowedOrg != "" && !id.OrgMember {
		return Member{}, refuseSignIn("you are not an active member of the GitHub organisation %s", method.AllowedOrg)
	}
	var m Member
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		inv, err := s.q.InviteUse(ctx, tx, hash)
		if err != nil {
			return mapErr(err)
		}
		if inv.TeamID == nil || *inv.TeamID != method.TeamID {
			return ErrNotFound
		}
		if email != inv.Email {
			return refuseSignIn("the provider signed you in as %s, but this invite is for %s; sign in to the provider as %s",
				id.Email, inv.Email, inv.Email)
		}
		row, err := s.q.MemberLockByEmail(ctx, tx, db.MemberLockByEmailParams{TeamID: method.TeamID, Email: inv.Email})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			m, err = s.addMember(ctx, tx, ActorInviteLink, method.TeamID, inv.Email, inv.Role, inv.TierID)
			if errors.Is(err, ErrConflict) {
				return refuseSignIn("%s belongs to another team on this gateway", inv.Email)
			} else if err != nil {
				return err
			}
		case err != nil:
			return err
		case row.Status != StatusActive:
			return refuseSignIn("%s is cut off from team %s; an owner can restore access", inv.Email, method.TeamName)
		default:
			m = memberFrom(row)
		}
		m.SignInMethod = method.Kind
		return s.q.MemberSetSignInMethod(ctx, tx, db.MemberSetSignInMethodParams{TeamID: m.TeamID, ID: m.ID, SignInMethod: &m.SignInMethod})
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: %s invite: %w", method.Kind, err)
	}
	return m, nil
}
