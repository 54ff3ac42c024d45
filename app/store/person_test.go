package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestTokenBelongsToWhoeverMadeIt: a token made in an owner's session is
// theirs, one made through it too, one made by the CLI the deployment's; a
// plain member makes none.
func TestTokenBelongsToWhoeverMadeIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	ann := must(f.st.AddMember(ctx, actor, f.team.ID, "ann@example.com", store.RoleOwner))(t)
	spec := store.AdminTokenSpec{TeamID: &f.team.ID, Name: "ci", Role: store.TokenRoleOwner, Lifetime: time.Hour}
	hers := must(f.st.CreateAdminToken(ctx, store.MemberActor(ann.ID), spec))(t)
	through := must(f.st.CreateAdminToken(ctx, hers.Actor(), spec))(t)
	ops := must(f.st.CreateAdminToken(ctx, store.ActorCLI, spec))(t)
	viaOps := must(f.st.CreateAdminToken(ctx, ops.Actor(), spec))(t)
	for _, c := range []struct {
		tok   store.IssuedAdminToken
		owner string
	}{{hers, store.OwnerMember}, {through, store.OwnerMember}, {ops, store.OwnerDeployment}, {viaOps, store.OwnerDeployment}} {
		if c.tok.Owner != c.owner || (c.owner == store.OwnerMember) != (c.tok.MemberID != nil && *c.tok.MemberID == ann.ID) {
			t.Errorf("token by %s: owner %s %v, want %s", c.tok.CreatedBy, c.tok.Owner, c.tok.MemberID, c.owner)
		}
	}
	if _, err := f.st.CreateAdminToken(ctx, store.MemberActor(f.member.ID), spec); !errors.As(err, new(*store.ForbiddenError)) {
		t.Errorf("a plain member makes a token: %v, want forbidden", err)
	}
	must(f.st.AddMember(ctx, actor, f.team.ID, "bo@example.com", store.RoleOwner))(t) // so Ann is not the last owner
	must(f.st.SetMemberRole(ctx, actor, f.team.ID, ann.ID, store.RoleMember))(t)
	var te *store.TokenError
	if _, err := f.st.AuthenticateAdminToken(ctx, through.Plaintext); !errors.As(err, &te) || te.Fault != "owner_not_owner" {
		t.Errorf("the token made through Ann's, after her demotion: %v, want owner_not_owner", err)
	}
	must(f.st.AuthenticateAdminToken(ctx, viaOps.Plaintext))(t)
}
