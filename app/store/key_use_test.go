package store_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy"
)

// TestLedgerBatchesRecordKeysLastUse: a key's last use is its newest request
// in any written batch; a late batch of older requests does not move it back,
// and a row naming no key (or no key of this store) is skipped, not an error.
func TestLedgerBatchesRecordKeysLastUse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	used := must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "laptop"))(t)
	idle := must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "ci"))(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	entry := func(id, key string, at time.Time) proxy.LedgerEntry {
		return proxy.LedgerEntry{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: key, RequestID: id, Model: "m",
			Status: proxy.LedgerSettled, CreatedAt: at}
	}
	if err := f.st.WriteLedger(ctx, []proxy.LedgerEntry{entry("a", used.ID, t0), entry("b", used.ID, t0.Add(time.Minute)),
		entry("c", "nokeywiththisid", t0)}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.WriteLedger(ctx, []proxy.LedgerEntry{entry("d", used.ID, t0.Add(-time.Hour))}); err != nil {
		t.Fatal(err)
	}
	got := must(f.st.KeysLastUsed(ctx, f.team.ID))(t)
	if !got[used.ID].Equal(t0.Add(time.Minute)) || len(got) != 1 {
		t.Errorf("last use = %v, want only %s at %v (and none for %s)", got, used.ID, t0.Add(time.Minute), idle.ID)
	}
	if other := must(f.st.CreateTeam(ctx, actor, "other"))(t); len(must(f.st.KeysLastUsed(ctx, other.ID))(t)) != 0 {
		t.Error("another team sees this team's keys' last use")
	}
}
