package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

func TestAdminTokenLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	issued := must(f.st.CreateAdminToken(ctx, actor, store.AdminTokenSpec{TeamID: &f.team.ID, Name: "ci", Role: store.TokenRoleRead, Lifetime: time.Hour}))(t)
	if !strings.HasPrefix(issued.Plaintext, "tga_") {
		t.Fatalf("plaintext %q lacks tga_", issued.Plaintext)
	}
	got := must(f.st.AuthenticateAdminToken(ctx, issued.Plaintext))(t)
	if got.ID != issued.ID || *got.TeamID != f.team.ID || got.Role != store.TokenRoleRead {
		t.Fatalf("authenticated %+v, want %+v", got, issued.AdminToken)
	}
	listed := must(f.st.AdminTokens(ctx, &f.team.ID))(t)
	if len(listed) != 1 || listed[0].LastUsedAt == nil || listed[0].CreatedBy != string(actor) {
		t.Fatalf("listed %+v, want the one token with its use and its creator (%s) recorded", listed, actor)
	}
	if deployment := must(f.st.AdminTokens(ctx, nil))(t); len(deployment) != 0 {
		t.Fatalf("the team's token is listed as the deployment's: %+v", deployment)
	}

	other := must(f.st.CreateTeam(ctx, actor, "other"))(t)
	if _, err := f.st.RevokeAdminToken(ctx, actor, &other.ID, issued.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another team revoked the token: %v", err)
	}
	must(f.st.RevokeAdminToken(ctx, actor, &f.team.ID, issued.ID))(t)
	if _, err := f.st.RevokeAdminToken(ctx, actor, &f.team.ID, issued.ID); !errors.As(err, new(*store.StateError)) {
		t.Fatalf("revoking twice: %v, want a state error", err)
	}

	for _, tc := range []struct{ plaintext, fault string }{
		{issued.Plaintext, "revoked"},
		{"tga_abc", "malformed"},
		{strings.Replace(issued.Plaintext, issued.ID, "aaaaaaaaaaaaa", 1), "unknown_id"},
		{issued.Plaintext[:len(issued.Plaintext)-1] + flip(issued.Plaintext[len(issued.Plaintext)-1]), "wrong_secret"},
		{strings.Replace(issued.Plaintext, "tga_", "tg_", 1), "malformed"},
	} {
		var te *store.TokenError
		if _, err := f.st.AuthenticateAdminToken(ctx, tc.plaintext); !errors.As(err, &te) || te.Fault != tc.fault {
			t.Errorf("authenticate %q: %v, want fault %s", tc.plaintext, err, tc.fault)
		}
	}
	audit := must(f.st.Audit(ctx, &f.team.ID, 10))(t)
	if audit[0].Action != "admin_token.revoke" || audit[1].Action != "admin_token.create" {
		t.Errorf("audit %+v, want create then revoke", audit[:2])
	}
	for _, e := range audit {
		if strings.Contains(string(e.After), issued.Plaintext[len(issued.Plaintext)-52:]) {
			t.Errorf("audit entry %s holds the token's secret", e.Action)
		}
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestAdminTokenRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, spec := range []store.AdminTokenSpec{
		{Name: "", Role: store.TokenRoleOwner, Lifetime: time.Hour},
		{Name: "x\x1b[31m", Role: store.TokenRoleOwner, Lifetime: time.Hour},
		{Name: "ci", Role: "admin", Lifetime: time.Hour},
		{Name: "ci", Role: store.TokenRoleOwner, Lifetime: 0},
		{Name: "ci", Role: store.TokenRoleOwner, Lifetime: 2 * store.MaxTokenLifetime},
	} {
		spec.TeamID = &f.team.ID
		if _, err := f.st.CreateAdminToken(t.Context(), actor, spec); !errors.As(err, new(*store.ValidationError)) {
			t.Errorf("created %+v: %v, want a validation error", spec, err)
		}
	}
}

func TestAdminTokenExpires(t *testing.T) {
	t.Parallel()
	f := setup(t)
	issued := must(f.st.CreateAdminToken(t.Context(), actor, store.AdminTokenSpec{Name: "deploy", Role: store.TokenRoleOwner, Lifetime: time.Millisecond}))(t)
	time.Sleep(5 * time.Millisecond)
	var te *store.TokenError
	if _, err := f.st.AuthenticateAdminToken(t.Context(), issued.Plaintext); !errors.As(err, &te) || te.Fault != "expired" {
		t.Fatalf("expired token: %v, want fault expired", err)
	}
}
