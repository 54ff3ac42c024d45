package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestTiersAndBudgetRequests: a tier set through the API binds the member
// with their own limits on top; an approval raises the budget by exactly the
// amount, once; a read token decides nothing; another team's request is not found.
func TestTiersAndBudgetRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme, beta := e.team("acme"), e.team("beta")
	f := e.fixture(acme, "ada@acme.test")
	owner, reader := e.token(&acme.ID, store.TokenRoleOwner), e.token(&acme.ID, store.TokenRoleRead)
	betaOwner := e.token(&beta.ID, store.TokenRoleOwner)
	member := "/api/v1/members/" + strconv.FormatInt(f.member.ID, 10)

	if r := e.call(owner, http.MethodPatch, "/api/v1/tiers/core", map[string]any{"limits": map[string]any{"concurrency": 4,
		"budget_micros": 1_000_000, "budget_period": "daily"}, "weight": 5}); r.status != http.StatusOK {
		t.Fatalf("setTier: %d %s", r.status, r.body)
	}
	var eff struct {
		Tier   string
		Limits struct {
			Concurrency  int64
			BudgetMicros int64 `json:"budget_micros"`
		} `json:"limits"`
		Granted int64 `json:"granted_micros"`
	}
	// The fixture gave the member a $5 monthly budget of their own: it wins.
	e.call(owner, http.MethodPut, member+"/tier", map[string]any{"tier": "core"}).decode(t, &eff)
	if eff.Tier != "core" || eff.Limits.Concurrency != 4 {
		t.Fatalf("setMemberTier = %+v", eff)
	}
	e.call(reader, http.MethodGet, member+"/effective-limits", nil).decode(t, &eff)
	if eff.Limits.BudgetMicros != 5_000_000 {
		t.Fatalf("effective budget %d; want the member's own 5000000", eff.Limits.BudgetMicros)
	}

	approve := "/api/v1/budget-requests/" + strconv.FormatInt(f.request.ID, 10) + "/approve"
	e.call(reader, http.MethodPost, approve, map[string]any{}).problem(t, http.StatusForbidden)
	e.call(betaOwner, http.MethodPost, approve, map[string]any{}).problem(t, http.StatusNotFound)
	var pending struct{ Requests []store.BudgetRequest }
	e.call(reader, http.MethodGet, "/api/v1/budget-requests", nil).decode(t, &pending)
	if len(pending.Requests) != 1 || pending.Requests[0].ID != f.request.ID {
		t.Fatalf("pending = %+v", pending)
	}
	var got store.BudgetRequest
	e.call(owner, http.MethodPost, approve, map[string]any{"note": "ok"}).decode(t, &got)
	if got.Status != store.RequestApproved || got.Note != "ok" {
		t.Fatalf("approve = %+v", got)
	}
	e.call(owner, http.MethodPost, approve, map[string]any{}).problem(t, http.StatusConflict)
	e.call(reader, http.MethodGet, member+"/effective-limits", nil).decode(t, &eff)
	if eff.Granted != 2_000_000 {
		t.Fatalf("granted %d; want exactly the request's 2000000", eff.Granted)
	}
	e.call(owner, http.MethodDelete, "/api/v1/tiers/core", nil).problem(t, http.StatusConflict)
	e.call(owner, http.MethodPost, "/api/v1/tiers", map[string]any{"name": "Bad\u202e"}).problem(t, http.StatusUnprocessableEntity)
}
