package store_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// auditedWriters are the Store methods that change state for the console or
// the CLI, each with the audit actions one call records. A method that takes
// an Actor is a writer; TestEveryWriterIsAudited fails until a new one is
// listed here and checked below.
var auditedWriters = map[string]string{
	"CreateTeam":           "team.create",
	"AddMember":            "member.add",
	"SetMemberStatus":      "member.status",
	"AddMemberInvited":     "member.add, invite.create",
	"RemoveMember":         "member.remove",
	"SetMemberRole":        "member.role",
	"SetMemberLimits":      "member.limits",
	"SetTeamLimits":        "team.limits",
	"SetTeamOverBudget":    "team.over_budget",
	"ChangeMemberLimits":   "member.limits",
	"ChangeTeamLimits":     "team.limits",
	"AddRoute":             "route.add",
	"UpdateRoute":          "route.update",
	"AddRouteTarget":       "route.target.add",
	"RemoveRouteTarget":    "route.target.remove",
	"SetRouteResilience":   "route.resilience",
	"IssueKey":             "key.issue",
	"RotateKey":            "key.issue, key.rotate",
	"RevokeKey":            "key.revoke",
	"SetPrice":             "price.set",
	"CreateInvite":         "invite.create",
	"ReissueInvite":        "invite.reissue",
	"RevokeInvites":        "invite.revoke",
	"DeleteRoute":          "route.delete",
	"CreateSetupLink":      "setup.link",
	"CreateAdminToken":     "admin_token.create",
	"RevokeAdminToken":     "admin_token.revoke",
	"SetSSOMethod":         "team.sso",
	"SetPasswordSignIn":    "team.password_sign_in",
	"CreateTier":           "tier.create",
	"ChangeTier":           "tier.update",
	"DeleteTier":           "tier.delete",
	"AssignTier":           "member.tier",
	"SetDefaultTier":       "team.default_tier",
	"AddMemberInTier":      "member.add",
	"CreateInviteInTier":   "invite.create",
	"CreateWebhook":        "webhook.create",
	"DeleteWebhook":        "webhook.delete",
	"RequestBudget":        "budget.request",
	"ApproveBudgetRequest": "budget.approve",
	"DeclineBudgetRequest": "budget.decline",
	// Writers whose actor is the link itself.
	"CompleteSetup": "team.create, member.add, member.password",
	"AcceptInvite":  "member.add, member.password",
}

func TestEveryWriterIsAudited(t *testing.T) {
	t.Parallel()
	actorType := reflect.TypeFor[store.Actor]()
	st := reflect.TypeFor[*store.Store]()
	for i := range st.NumMethod() {
		m := st.Method(i)
		takesActor := false
		for j := range m.Type.NumIn() {
			takesActor = takesActor || m.Type.In(j) == actorType
		}
		if _, listed := auditedWriters[m.Name]; takesActor && !listed {
			t.Errorf("Store.%s takes an Actor but has no audit check in auditedWriters", m.Name)
		}
	}

	f := setup(t)
	ctx := t.Context()
	checked := map[string]bool{}
	// check runs one writer and compares the actions it audited, oldest first.
	check := func(writer string, write func()) []store.AuditEntry {
		t.Helper()
		checked[writer] = true
		entries := f.audited(t, write)
		var got []string
		for _, e := range entries {
			got = append(got, e.Action)
			if !slices.Contains(store.AuditActions(), e.Action) {
				t.Errorf("%s audited %q, which is not in store.AuditActions: the console has no sentence for it", writer, e.Action)
			}
			if e.Actor == "" || time.Since(e.At) > time.Minute {
				t.Errorf("%s: audit row %+v has no actor or an old time", writer, e)
			}
		}
		if want := auditedWriters[writer]; strings.Join(got, ", ") != want {
			t.Errorf("%s audited %q, want %q", writer, got, want)
		}
		return entries
	}
	// Setup links work only while the gateway has no owner, so they go first.
	var link string
	check("CreateSetupLink", func() { link, _ = must2(f.st.CreateSetupLink(ctx, actor))(t) })
	check("CompleteSetup", func() {
		must(f.st.CompleteSetup(ctx, link, "delta", "owner@delta.example", "a long enough password"))(t)
	})
	check("CreateTeam", func() { must(f.st.CreateTeam(ctx, actor, "gamma"))(t) })
	var bob store.Member
	check("AddMember", func() { bob = must(f.st.AddMember(ctx, actor, f.team.ID, "bob@example.com", store.RoleMember))(t) })
	check("SetMemberStatus", func() { must(f.st.SetMemberStatus(ctx, actor, f.team.ID, bob.ID, store.StatusDisabled))(t) })
	check("SetMemberRole", func() { must(f.st.SetMemberRole(ctx, actor, f.team.ID, bob.ID, store.RoleOwner))(t) })
	var carol store.Member
	check("AddMemberInvited", func() {
		var err error
		carol, _, _, err = f.st.AddMemberInvited(ctx, actor, f.team.ID, "carol@example.com", store.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
	})
	check("RemoveMember", func() { must(f.st.RemoveMember(ctx, actor, f.team.ID, carol.ID))(t) })
	budget := int64(5_000_000)
	limits := check("SetMemberLimits", func() {
		must(f.st.SetMemberLimits(ctx, actor, f.team.ID, bob.ID, store.Limits{RateLimit: 60, RatePeriod: time.Minute,
			Budget: &budget, BudgetPeriod: "monthly"}))(t)
	})
	if len(limits) == 1 && (!strings.Contains(string(limits[0].After), "5000000") || len(limits[0].Before) == 0) {
		t.Errorf("member.limits row before %s after %s: want both, with the budget", limits[0].Before, limits[0].After)
	}
	check("SetTeamLimits", func() {
		must(f.st.SetTeamLimits(ctx, actor, f.team.ID, store.Limits{Concurrency: 8, RatePeriod: time.Second}))(t)
	})
	raise := func(l store.Limits) store.Limits { l.Concurrency++; return l }
	check("ChangeMemberLimits", func() { must(f.st.ChangeMemberLimits(ctx, actor, f.team.ID, bob.ID, raise))(t) })
	check("ChangeTeamLimits", func() { must(f.st.ChangeTeamLimits(ctx, actor, f.team.ID, raise))(t) })
	check("SetTeamOverBudget", func() { must(f.st.SetTeamOverBudget(ctx, actor, f.team.ID, store.OverBudgetFit))(t) })
	var route store.Route
	check("AddRoute", func() {
		route = must(f.st.AddRoute(ctx, actor, store.RouteSpec{TeamID: f.team.ID, Preset: "openai", UpstreamURL: "http://127.0.0.1:1"}))(t)
	})
	updated := check("UpdateRoute", func() {
		must(f.st.UpdateRoute(ctx, actor, route.ID, store.RouteSpec{TeamID: f.team.ID, Preset: "openai", UpstreamURL: "http://127.0.0.1:2"}))(t)
	})
	if len(updated) == 1 && (len(updated[0].Before) == 0 || !strings.Contains(string(updated[0].After), "127.0.0.1:2")) {
		t.Errorf("route.update row before %s after %s", updated[0].Before, updated[0].After)
	}
	target := store.RouteTarget{UpstreamURL: "http://127.0.0.1:3", CredentialEnv: "TOLLGATE_CREDENTIAL_SECOND"}
	check("AddRouteTarget", func() {
		if err := f.st.AddRouteTarget(ctx, actor, f.team.ID, route.Prefix, target); err != nil {
			t.Fatal(err)
		}
	})
	check("SetRouteResilience", func() { must(f.st.SetRouteResilience(ctx, actor, f.team.ID, route.Prefix, 3, "/v1/models"))(t) })
	check("RemoveRouteTarget", func() {
		if err := f.st.RemoveRouteTarget(ctx, actor, f.team.ID, route.Prefix, target); err != nil {
			t.Fatal(err)
		}
	})
	check("DeleteRoute", func() { must(f.st.DeleteRoute(ctx, actor, f.team.ID, route.ID))(t) })
	var key store.IssuedKey
	check("IssueKey", func() { key = must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "ci"))(t) })
	var rotated store.IssuedKey
	check("RotateKey", func() { rotated = must(f.st.RotateKey(ctx, actor, f.team.ID, key.ID, time.Hour))(t) })
	check("RevokeKey", func() { must(f.st.RevokeKey(ctx, actor, f.team.ID, rotated.ID))(t) })
	price := must(f.st.Price(ctx, "claude-sonnet-4-5"))(t)
	price.OutputPerMTok++
	check("SetPrice", func() { must(f.st.SetPrice(ctx, actor, price))(t) })
	var invite string
	check("CreateInvite", func() {
		invite, _ = must2(f.st.CreateInvite(ctx, actor, f.team.ID, "cy@example.com", store.RoleMember))(t)
	})
	check("ReissueInvite", func() {
		invite, _ = must2(f.st.ReissueInvite(ctx, actor, f.team.ID, "cy@example.com"))(t)
	})
	must2(f.st.CreateInvite(ctx, actor, f.team.ID, "dee@example.com", store.RoleMember))(t)
	check("RevokeInvites", func() {
		if err := f.st.RevokeInvites(ctx, actor, f.team.ID, "dee@example.com"); err != nil {
			t.Fatal(err)
		}
	})
	check("AcceptInvite", func() { must(f.st.AcceptInvite(ctx, invite, "a long enough password"))(t) })
	check("SetSSOMethod", func() {
		must(f.st.SetSSOMethod(ctx, actor, store.SSOMethod{TeamID: f.team.ID, Kind: store.SignInOIDC,
			IssuerURL: "https://id.example", ClientID: "tollgate", JoinPolicy: store.JoinInvited, Enabled: true}))(t)
	})
	check("SetPasswordSignIn", func() { must(f.st.SetPasswordSignIn(ctx, actor, f.team.ID, false))(t) })

	var token store.IssuedAdminToken
	check("CreateAdminToken", func() {
		token = must(f.st.CreateAdminToken(ctx, actor, store.AdminTokenSpec{TeamID: &f.team.ID, Name: "ci", Role: store.TokenRoleOwner, Lifetime: time.Hour}))(t)
	})
	check("RevokeAdminToken", func() { must(f.st.RevokeAdminToken(ctx, actor, &f.team.ID, token.ID))(t) })

	check("CreateTier", func() {
		must(f.st.CreateTier(ctx, actor, f.team.ID, store.Tier{Name: "core", Weight: 2, Limits: store.Limits{Budget: new(int64(5_000_000))}}))(t)
	})
	check("ChangeTier", func() {
		must(f.st.ChangeTier(ctx, actor, f.team.ID, "core", func(tr store.Tier) store.Tier { tr.Weight = 3; return tr }))(t)
	})
	check("AssignTier", func() { must(f.st.AssignTier(ctx, actor, f.team.ID, f.member.ID, "core"))(t) })
	check("SetDefaultTier", func() {
		if err := f.st.SetDefaultTier(ctx, actor, f.team.ID, "core"); err != nil {
			t.Fatal(err)
		}
	})
	check("AddMemberInTier", func() {
		must(f.st.AddMemberInTier(ctx, actor, f.team.ID, "eve@example.com", store.RoleMember, store.TierNone))(t)
	})
	check("CreateInviteInTier", func() {
		must2(f.st.CreateInviteInTier(ctx, actor, f.team.ID, "fay@example.com", store.RoleMember, "core"))(t)
	})
	if err := f.st.SetDefaultTier(ctx, actor, f.team.ID, store.TierNone); err != nil {
		t.Fatal(err)
	}
	var hook store.Webhook
	check("CreateWebhook", func() {
		hook = must(f.st.CreateWebhook(ctx, actor, f.team.ID, "ops", "https://hooks.example.com/x", store.WebhookSlack))(t)
	})
	check("DeleteWebhook", func() {
		if err := f.st.DeleteWebhook(ctx, actor, f.team.ID, hook.ID); err != nil {
			t.Fatal(err)
		}
	})
	var asked store.BudgetRequest
	check("RequestBudget", func() {
		asked = must(f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 1_000_000, "eval run"))(t)
	})
	check("ApproveBudgetRequest", func() { must(f.st.ApproveBudgetRequest(ctx, store.ActorCLI, f.team.ID, asked.ID, ""))(t) })
	asked = must(f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 1_000_000, "again"))(t)
	check("DeclineBudgetRequest", func() { must(f.st.DeclineBudgetRequest(ctx, store.ActorCLI, f.team.ID, asked.ID, "not now"))(t) })
	must(f.st.AssignTier(ctx, actor, f.team.ID, f.member.ID, ""))(t)
	check("DeleteTier", func() {
		if err := f.st.DeleteTier(ctx, actor, f.team.ID, "core"); err != nil {
			t.Fatal(err)
		}
	})

	for writer := range auditedWriters {
		if !checked[writer] {
			t.Errorf("%s is listed but not exercised", writer)
		}
	}
	// Nothing an audit row carries is a secret: no key or token plaintext, no link token.
	for _, e := range must(f.st.Audit(ctx, nil, 1000))(t) {
		row := string(e.Before) + string(e.After) + e.Target
		for _, secret := range []string{key.Plaintext, rotated.Plaintext, invite, link, token.Plaintext} {
			if secret != "" && strings.Contains(row, secret) {
				t.Errorf("audit row %s %s carries a secret", e.Action, e.Target)
			}
		}
	}
}

// must2 is must for writers that return two values and an error.
func must2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}
