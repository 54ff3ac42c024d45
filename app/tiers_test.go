package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
)

// memberBudget is the member's budget in replica gw's snapshot; -1: none.
func memberBudget(gw *apptest.Replica, f *fixture) int64 {
	m, _ := gw.App.Snapshots.Current().Member(f.member.ID)
	if m.Limits.Budget == nil {
		return -1
	}
	return m.Limits.Budget.Limit
}

// TestTierChangeBindsOnSecondReplica: a member's limits come from their tier,
// and a change of the tier binds on another replica at the next request, by
// the same NOTIFY as a member's own limits (the replicas poll every 10 minutes).
func TestTierChangeBindsOnSecondReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := f.replica(t)
	ctx := context.Background()
	_, err := f.st.CreateTier(ctx, store.ActorCLI, f.team.ID, store.Tier{Name: "intern", Weight: 1,
		Limits: store.Limits{RateLimit: 1, RatePeriod: time.Minute}})
	must(t, err)
	_, err = f.st.AssignTier(ctx, store.ActorCLI, f.team.ID, f.member.ID, "intern")
	must(t, err)
	eventually(t, 5*time.Second, "tier on the second replica", func() bool {
		m, _ := second.App.Snapshots.Current().Member(f.member.ID)
		return m.Limits.Rate != nil
	})
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("first request in the tier: %d %s", r.status, r.body)
	}
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusTooManyRequests {
		t.Fatalf("second request at 1 a minute: %d", r.status)
	}
	_, err = f.st.ChangeTier(ctx, store.ActorCLI, f.team.ID, "intern", func(tr store.Tier) store.Tier {
		tr.Limits.RateLimit = 1000
		return tr
	})
	must(t, err)
	took := eventually(t, 5*time.Second, "tier change on the second replica", func() bool {
		return do(t, anthropicRequest(t, second.URL, f.key, messagesBody)).status == http.StatusOK
	})
	t.Logf("tier change committed -> binding on a second replica in %s", took)
}

// TestBudgetGrantThroughTheGateway: a member whose budget is spent gets 402;
// they ask, an owner approves on one replica's store, and the next request on
// another replica is admitted; the grant is exact, and spend never passes the
// raised budget.
func TestBudgetGrantThroughTheGateway(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := f.replica(t)
	ctx := context.Background()
	_, err := f.st.CreateTier(ctx, store.ActorCLI, f.team.ID, store.Tier{Name: "core", Weight: 1,
		Limits: store.Limits{Budget: dollarsPtr(3000), BudgetPeriod: "daily"}})
	must(t, err)
	_, err = f.st.AssignTier(ctx, store.ActorCLI, f.team.ID, f.member.ID, "core")
	must(t, err)
	eventually(t, 5*time.Second, "tier budget on both replicas", func() bool {
		return memberBudget(f.gw, f) == 3000 && memberBudget(second, f) == 3000
	})
	// Each call holds under $0.001 and settles at 489 micro-dollars.
	for i := 0; ; i++ {
		r := do(t, anthropicRequest(t, f.gw.URL, f.key, messagesBody))
		if r.status == http.StatusPaymentRequired {
			break
		}
		if r.status != http.StatusOK || i > 20 {
			t.Fatalf("call %d under a $0.003 budget: %d", i, r.status)
		}
	}
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusPaymentRequired {
		t.Fatalf("spent, on the second replica: %d", r.status)
	}
	req, err := f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 1000, "eval run for the paper")
	must(t, err)
	if _, err := f.st.ApproveBudgetRequest(ctx, store.ActorCLI, f.team.ID, req.ID, ""); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, "grant on the second replica", func() bool {
		return do(t, anthropicRequest(t, second.URL, f.key, messagesBody)).status == http.StatusOK
	})
	t.Logf("approval committed -> admitted on a second replica in %s", took)
	if got := memberBudget(second, f); got != 4000 {
		t.Fatalf("budget on the second replica after the grant: %d, want exactly 3000 + 1000", got)
	}
	// Spend until refused again: never more than the raised budget.
	for i := 0; ; i++ {
		r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody))
		if r.status == http.StatusPaymentRequired {
			break
		}
		if r.status != http.StatusOK || i > 20 {
			t.Fatalf("call %d after the grant: %d", i, r.status)
		}
	}
	// The settles reach the ledger a moment after the responses.
	var spent int64
	eventually(t, 5*time.Second, "the ledger to pass the old budget", func() bool {
		rows, err := f.st.Ledger(ctx, f.team.ID, nil, time.Time{}, 1000)
		must(t, err)
		spent = 0
		for _, r := range rows {
			spent += r.CostMicros
		}
		return spent > 3000
	})
	if spent > 4000 {
		t.Fatalf("spent %d micro-dollars; want at most the 4000 of the budget with the grant", spent)
	}
	// A declined request changes nothing.
	req, err = f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 1000, "more")
	must(t, err)
	_, err = f.st.DeclineBudgetRequest(ctx, store.ActorCLI, f.team.ID, req.ID, "no")
	must(t, err)
	time.Sleep(200 * time.Millisecond) // a reload, had the decline caused one, is done by now
	if r := do(t, anthropicRequest(t, second.URL, f.key, messagesBody)); r.status != http.StatusPaymentRequired || memberBudget(second, f) != 4000 {
		t.Fatalf("after a decline: %d, budget %d", r.status, memberBudget(second, f))
	}
}
