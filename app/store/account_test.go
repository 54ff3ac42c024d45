package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

const password = "correct horse battery"

// accounts is a store with a direct pool, for tests that age links.
type accounts struct {
	*fixture
	pool *pgxpool.Pool
}

func setupAccounts(t *testing.T) *accounts {
	t.Helper()
	pool := dbtest.Pool(t, dbtest.Schema(t))
	return &accounts{fixture: &fixture{st: store.New(pool)}, pool: pool}
}

func (a *accounts) expireLinks(t *testing.T) {
	t.Helper()
	if _, err := a.pool.Exec(t.Context(), "UPDATE invite SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
}

func TestSetupLink(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx := t.Context()
	if ok := must(a.st.AnyCanSignIn(ctx))(t); ok {
		t.Fatal("AnyCanSignIn on an empty database = true")
	}
	expired := mustLink(t)(a.st.CreateSetupLink(ctx, store.ActorCLI))
	a.expireLinks(t)
	a.refused(t, "Expired", "notfound", func() error {
		_, err := a.st.CompleteSetup(ctx, expired, "beta", "other@acme.test", password)
		return err
	})

	// Another link, as a second replica prints at its start.
	printed := mustLink(t)(a.st.CreateSetupLink(ctx, store.ActorCLI))
	token, inv, err := a.st.CreateSetupLink(ctx, store.ActorCLI)
	if err != nil || inv.TeamID != nil || inv.Role != store.RoleOwner {
		t.Fatalf("CreateSetupLink = %+v, %v; want an owner link without a team", inv, err)
	}
	if _, err := a.st.PendingInvite(ctx, token); err != nil {
		t.Fatalf("PendingInvite(setup token): %v", err)
	}
	if _, err := a.st.AcceptInvite(ctx, token, password); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AcceptInvite(setup token) err = %v, want ErrNotFound", err)
	}

	// A refused form leaves the link usable and records nothing.
	a.refused(t, "BadTeamName", "name", func() error {
		_, err := a.st.CompleteSetup(ctx, token, "Acme Inc", "owner@acme.test", password)
		return err
	})
	a.refused(t, "ShortPassword", "password", func() error {
		_, err := a.st.CompleteSetup(ctx, token, "acme", "owner@acme.test", "short")
		return err
	})

	var owner store.Member
	entries := a.audited(t, func() { owner = must(a.st.CompleteSetup(ctx, token, "acme", "Owner@Acme.test", password))(t) })
	if owner.Role != store.RoleOwner || owner.Email != "owner@acme.test" {
		t.Errorf("setup made %+v, want the owner", owner)
	}
	if got, want := actions(entries), "team.create acme, member.add owner@acme.test, member.password owner@acme.test"; got != want {
		t.Errorf("setup audited %q, want %q", got, want)
	}
	for _, e := range entries {
		if strings.Contains(string(e.After), "argon2") || e.Actor != string(store.ActorSetupLink) {
			t.Errorf("audit row %s by %s: %s", e.Action, e.Actor, e.After)
		}
	}
	if ok := must(a.st.AnyCanSignIn(ctx))(t); !ok {
		t.Error("AnyCanSignIn after setup = false")
	}
	if m := must(a.st.SignIn(ctx, " OWNER@acme.test", password))(t); m.ID != owner.ID {
		t.Errorf("SignIn = %+v, want the owner", m)
	}
	// Once an owner exists, every setup link is refused: this one, the other
	// printed before (spent, too), and any new one.
	a.refused(t, "SecondUse", "setupdone", func() error {
		_, err := a.st.CompleteSetup(ctx, token, "beta", "other@acme.test", password)
		return err
	})
	a.refused(t, "PrintedBefore", "setupdone", func() error {
		_, err := a.st.CompleteSetup(ctx, printed, "beta", "other@acme.test", password)
		return err
	})
	if _, err := a.st.PendingInvite(ctx, printed); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a setup link printed before the owner is still pending: %v", err)
	}
	a.refused(t, "NewLink", "setupdone", func() error { _, _, err := a.st.CreateSetupLink(ctx, store.ActorCLI); return err })
}

func TestInvite(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx := t.Context()
	team := must(a.st.CreateTeam(ctx, actor, "acme"))(t)
	other := must(a.st.CreateTeam(ctx, actor, "other"))(t)
	must(a.st.AddMember(ctx, actor, other.ID, "taken@other.test", store.RoleMember))(t)
	cliAdded := must(a.st.AddMember(ctx, actor, team.ID, "cli@acme.test", store.RoleMember))(t)

	a.refused(t, "OtherTeamsEmail", "email", func() error {
		_, _, err := a.st.CreateInvite(ctx, actor, team.ID, "taken@other.test", store.RoleMember)
		return err
	})
	a.refused(t, "BadRole", "role", func() error {
		_, _, err := a.st.CreateInvite(ctx, actor, team.ID, "x@acme.test", "admin")
		return err
	})

	var token string
	entries := a.audited(t, func() {
		var inv store.Invite
		var err error
		token, inv, err = a.st.CreateInvite(ctx, actor, team.ID, "ada@acme.test", store.RoleMember)
		if err != nil || *inv.TeamID != team.ID || inv.Email != "ada@acme.test" {
			t.Fatalf("CreateInvite = %+v, %v", inv, err)
		}
	})
	if got := actions(entries); got != "invite.create ada@acme.test" || strings.Contains(string(entries[0].After), token) {
		t.Errorf("invite audited %q: %s", got, entries[0].After)
	}
	if pending := must(a.st.PendingInvites(ctx, team.ID))(t); len(pending) != 1 || pending[0].Email != "ada@acme.test" {
		t.Errorf("PendingInvites = %+v", pending)
	}
	if _, err := a.st.CompleteSetup(ctx, token, "beta", "ada@acme.test", password); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CompleteSetup(invite token) err = %v, want ErrNotFound", err)
	}
	a.refused(t, "ShortPassword", "password", func() error { _, err := a.st.AcceptInvite(ctx, token, "short"); return err })

	// Two people racing on one link: exactly one gets in.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = a.st.AcceptInvite(ctx, token, password) })
	}
	wg.Wait()
	var ok int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("losing AcceptInvite err = %v, want ErrNotFound", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d concurrent uses of one invite succeeded, want 1", ok, len(errs))
	}
	ada := must(a.st.SignIn(ctx, "ada@acme.test", password))(t)
	if ada.TeamID != team.ID || ada.Role != store.RoleMember {
		t.Errorf("invited member = %+v", ada)
	}
	if pending := must(a.st.PendingInvites(ctx, team.ID))(t); len(pending) != 0 {
		t.Errorf("PendingInvites after use = %+v", pending)
	}

	// A member the CLI added gets their password through an invite.
	cliToken := mustLink(t)(a.st.CreateInvite(ctx, actor, team.ID, "cli@acme.test", store.RoleOwner))
	if m := must(a.st.AcceptInvite(ctx, cliToken, password))(t); m.ID != cliAdded.ID || m.Role != store.RoleMember {
		t.Errorf("accepting for a CLI-added member = %+v, want %+v unchanged", m, cliAdded)
	}
	a.refused(t, "AlreadySignedUp", "email", func() error {
		_, _, err := a.st.CreateInvite(ctx, actor, team.ID, "ada@acme.test", store.RoleMember)
		return err
	})

	late := mustLink(t)(a.st.CreateInvite(ctx, actor, team.ID, "late@acme.test", store.RoleMember))
	a.expireLinks(t)
	if _, err := a.st.PendingInvite(ctx, late); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PendingInvite(expired) err = %v, want ErrNotFound", err)
	}
	a.refused(t, "Expired", "notfound", func() error { _, err := a.st.AcceptInvite(ctx, late, password); return err })
}

// TestInviteToSSOOnlyTeam: with password sign-in off, a password is refused
// and uses nothing; the team's provider completes the invite only for the
// invited email, only for that team, and as the invite's role.
func TestInviteToSSOOnlyTeam(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx := t.Context()
	team := must(a.st.CreateTeam(ctx, actor, "acme"))(t)
	other := must(a.st.CreateTeam(ctx, actor, "other"))(t)
	method := store.SSOMethod{TeamID: team.ID, TeamName: "acme", Kind: store.SignInOIDC, IssuerURL: "https://id.example",
		ClientID: "tollgate", JoinPolicy: store.JoinInvited, Enabled: true}
	method = must(a.st.SetSSOMethod(ctx, actor, method))(t)
	must(a.st.SetPasswordSignIn(ctx, actor, team.ID, false))(t)
	token := mustLink(t)(a.st.CreateInvite(ctx, actor, team.ID, "boss@acme.test", store.RoleOwner))
	ref := store.InviteRef(token)

	if _, err := a.st.AcceptInvite(ctx, token, password); !errors.Is(err, store.ErrPasswordSignInOff) {
		t.Fatalf("AcceptInvite with password sign-in off: %v, want ErrPasswordSignInOff", err)
	}
	otherMethod := method
	otherMethod.TeamID, otherMethod.TeamName = other.ID, "other"
	a.refused(t, "OtherTeamsMethod", "notfound", func() error {
		_, err := a.st.AcceptInviteSSO(ctx, otherMethod, ref, store.SSOIdentity{Email: "boss@acme.test"})
		return err
	})
	if _, err := a.st.AcceptInviteSSO(ctx, method, ref, store.SSOIdentity{Email: "mallory@acme.test"}); !errors.As(err, new(*store.SignInRefusedError)) {
		t.Errorf("another identity: %v, want SignInRefusedError", err)
	}
	if _, err := a.st.PendingInvite(ctx, token); err != nil {
		t.Fatalf("refusals used the invite: %v", err)
	}
	boss := must(a.st.AcceptInviteSSO(ctx, method, ref, store.SSOIdentity{Email: " Boss@acme.test"}))(t)
	if boss.Role != store.RoleOwner || boss.SignInMethod != store.SignInOIDC || boss.TeamID != team.ID {
		t.Errorf("completed invite made %+v, want acme's owner signed in by OIDC", boss)
	}
	a.refused(t, "Twice", "notfound", func() error {
		_, err := a.st.AcceptInviteSSO(ctx, method, ref, store.SSOIdentity{Email: "boss@acme.test"})
		return err
	})
}

func TestSignInFailuresLookAlike(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx := t.Context()
	token := mustLink(t)(a.st.CreateSetupLink(ctx, store.ActorCLI))
	owner := must(a.st.CompleteSetup(ctx, token, "acme", "owner@acme.test", password))(t)
	must(a.st.AddMember(ctx, actor, owner.TeamID, "nopassword@acme.test", store.RoleMember))(t)

	for name, try := range map[string][2]string{
		"WrongPassword": {"owner@acme.test", password + "!"},
		"UnknownEmail":  {"nobody@acme.test", password},
		"NoPasswordYet": {"nopassword@acme.test", ""},
		"Empty":         {"", ""},
		"HugePassword":  {"owner@acme.test", strings.Repeat("x", 1<<20)},
	} {
		if _, err := a.st.SignIn(ctx, try[0], try[1]); err != store.ErrBadCredentials {
			t.Errorf("%s: err = %v, want ErrBadCredentials", name, err)
		}
	}
}

// mustLink returns the token of a new link, failing the test on error:
// mustLink(t)(st.CreateInvite(...)).
func mustLink(t *testing.T) func(string, store.Invite, error) string {
	return func(token string, _ store.Invite, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
}
