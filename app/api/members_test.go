package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
)

// personToken is an owner token that belongs to member m (made in their name).
func (e *env) personToken(m store.Member) string {
	e.t.Helper()
	tok, err := e.st.CreateAdminToken(context.Background(), store.MemberActor(m.ID), store.AdminTokenSpec{TeamID: &m.TeamID,
		Name: "own", Role: store.TokenRoleOwner, Lifetime: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Plaintext
}

// TestRemoveMember: DELETE /members/{id} removes a member for good: their key
// is refused at the gateway, they are listed as removed with their audit row
// kept, and a removal is not undone by a restore. Nobody removes themselves,
// and the team's last active owner cannot be removed.
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(mock.New(mock.Options{AnthropicKey: mockAnthropicKey, OutputTokens: 5}))
	t.Cleanup(upstream.Close)
	e := newEnv(t, map[string]string{"ANTHROPIC_API_KEY": mockAnthropicKey})
	ctx := context.Background()
	acme := e.team("acme")
	team := e.token(&acme.ID, store.TokenRoleOwner)
	if _, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: acme.ID, Preset: "anthropic", UpstreamURL: upstream.URL}); err != nil {
		t.Fatal(err)
	}
	olga, err := e.st.AddMember(ctx, store.ActorCLI, acme.ID, "olga@acme.test", store.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	oscar, err := e.st.AddMember(ctx, store.ActorCLI, acme.ID, "oscar@acme.test", store.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	ada, err := e.st.AddMember(ctx, store.ActorCLI, acme.ID, "ada@acme.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.st.IssueKey(ctx, store.ActorCLI, acme.ID, ada.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	olgaToken := e.personToken(olga)
	waitForGateway(t, e, key.Plaintext, http.StatusOK)

	path := func(m store.Member) string { return "/api/v1/members/" + strconv.FormatInt(m.ID, 10) }
	var removed store.Member
	r := e.call(olgaToken, http.MethodDelete, path(ada), nil)
	if r.status != http.StatusOK {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	if r.decode(t, &removed); removed.Status != store.StatusRemoved {
		t.Errorf("removed member %+v, want status removed", removed)
	}
	waitForGateway(t, e, key.Plaintext, http.StatusUnauthorized)
	keys, err := e.st.Keys(ctx, acme.ID)
	if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
		t.Errorf("after removal the key is %+v (%v), want it revoked", keys, err)
	}
	var listed struct{ Members []store.Member }
	e.call(team, http.MethodGet, "/api/v1/members", nil).decode(t, &listed)
	if len(listed.Members) != 3 || listed.Members[2].Email != ada.Email || listed.Members[2].Status != store.StatusRemoved {
		t.Errorf("listed after removal: %+v, want ada kept as removed", listed.Members)
	}
	entries, err := e.st.Audit(ctx, &acme.ID, 1)
	if err != nil || len(entries) != 1 || entries[0].Action != store.ActionMemberRemove || entries[0].Target != ada.Email {
		t.Errorf("audit: %+v (%v), want member.remove of ada", entries, err)
	}
	if p := e.call(team, http.MethodDelete, path(ada), nil).problem(t, http.StatusConflict); !strings.Contains(p.Detail, "already removed") {
		t.Errorf("removing twice: %+v", p)
	}
	if p := e.call(team, http.MethodPost, path(ada)+"/restore", nil).problem(t, http.StatusConflict); !strings.Contains(p.Detail, "removed") {
		t.Errorf("restoring a removed member: %+v", p)
	}

	// Olga cannot remove herself, even with another owner left.
	if p := e.call(olgaToken, http.MethodDelete, path(olga), nil).problem(t, http.StatusForbidden); !strings.Contains(p.Detail, "yourself") {
		t.Errorf("removing oneself: %+v", p)
	}
	if r := e.call(team, http.MethodDelete, path(olga), nil); r.status != http.StatusOK {
		t.Fatalf("remove an owner who is not the last: %d %s", r.status, r.body)
	}
	// Her token stopped with her.
	e.call(olgaToken, http.MethodGet, "/api/v1/members", nil).problem(t, http.StatusUnauthorized)
	if p := e.call(team, http.MethodDelete, path(oscar), nil).problem(t, http.StatusConflict); !strings.Contains(p.Detail, "last active owner") {
		t.Errorf("removing the last owner: %+v", p)
	}
	e.call(team, http.MethodDelete, "/api/v1/members/999999", nil).problem(t, http.StatusNotFound)
}

// TestDeleteRoute: DELETE /routes/{id} stops the gateway serving the prefix
// and is audited; deleting it again is a 404.
func TestDeleteRoute(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(mock.New(mock.Options{AnthropicKey: mockAnthropicKey, OutputTokens: 5}))
	t.Cleanup(upstream.Close)
	e := newEnv(t, map[string]string{"ANTHROPIC_API_KEY": mockAnthropicKey})
	ctx := context.Background()
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	route, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: acme.ID, Preset: "anthropic", UpstreamURL: upstream.URL})
	if err != nil {
		t.Fatal(err)
	}
	ada, err := e.st.AddMember(ctx, store.ActorCLI, acme.ID, "ada@acme.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.st.IssueKey(ctx, store.ActorCLI, acme.ID, ada.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	waitForGateway(t, e, key.Plaintext, http.StatusOK)

	path := "/api/v1/routes/" + strconv.FormatInt(route.ID, 10)
	if r := e.call(owner, http.MethodDelete, path, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete route: %d %s", r.status, r.body)
	}
	waitForGateway(t, e, key.Plaintext, http.StatusNotFound)
	if routes, err := e.st.Routes(ctx, acme.ID); err != nil || len(routes) != 0 {
		t.Errorf("routes after delete: %+v (%v)", routes, err)
	}
	entries, err := e.st.Audit(ctx, &acme.ID, 1)
	if err != nil || len(entries) != 1 || entries[0].Action != store.ActionRouteDelete || entries[0].Target != route.Prefix {
		t.Errorf("audit: %+v (%v), want route.delete of %s", entries, err, route.Prefix)
	}
	e.call(owner, http.MethodDelete, path, nil).problem(t, http.StatusNotFound)
}

// TestAddMemberIsInvited: a member added through the API has no way in until
// they use the invite link the answer carries (shown only then): they are
// "invited", and once they set a password, no longer.
func TestAddMemberIsInvited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	var added struct {
		store.Member
		InviteLink      string    `json:"invite_link"`
		InviteExpiresAt time.Time `json:"invite_expires_at"`
	}
	r := e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": "ada@acme.test"})
	if r.status != http.StatusCreated {
		t.Fatalf("add member: %d %s", r.status, r.body)
	}
	r.decode(t, &added)
	_, token, found := strings.Cut(added.InviteLink, "/console/invite/")
	if !added.Invited || !found || token == "" || added.InviteExpiresAt.Before(time.Now()) {
		t.Fatalf("added %+v, want invited with an invite link", added)
	}
	if inv, err := e.st.PendingInvite(context.Background(), token); err != nil || inv.Email != "ada@acme.test" {
		t.Fatalf("the link's invite: %+v (%v)", inv, err)
	}
	var got store.Member
	e.call(owner, http.MethodGet, "/api/v1/members/"+strconv.FormatInt(added.ID, 10), nil).decode(t, &got)
	if !got.Invited {
		t.Errorf("GET the member: %+v, want invited", got)
	}
	if _, err := e.st.AcceptInvite(context.Background(), token, "a long enough password"); err != nil {
		t.Fatal(err)
	}
	e.call(owner, http.MethodGet, "/api/v1/members/"+strconv.FormatInt(added.ID, 10), nil).decode(t, &got)
	if got.Invited {
		t.Errorf("after the invite was used: %+v, want no longer invited", got)
	}
}
