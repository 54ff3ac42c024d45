package store_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// TestFlushLedgerInOneStatement: a batch's rows go in together. A held row
// keeps no route, HTTP status or settle time (NULL, read back as zero); a
// settle makes it final and says so; a late held write never reverts a final
// row and is not reported; a request twice in one batch is refused whole.
func TestFlushLedgerInOneStatement(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	held := func(id string) proxy.LedgerEntry {
		return proxy.LedgerEntry{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: "k1", RequestID: id, Model: "m",
			Status: proxy.LedgerHeld, HeldMicros: 500, CreatedAt: t0, Epoch: 1, Seq: 3}
	}
	settled := func(id string, cost int64) proxy.LedgerEntry {
		e := held(id)
		e.Status, e.HTTPStatus, e.CostMicros, e.SettledAt = proxy.LedgerSettled, 200, cost, t0.Add(time.Second)
		e.Usage = usage.Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}
		return e
	}

	first := must(f.st.FlushLedger(ctx, []proxy.LedgerEntry{held("a"), settled("b", 70), held("c")}))(t)
	if len(first.Final) != 1 || first.Final[0].RequestID != "b" {
		t.Fatalf("final after the first batch = %v, want only b", first.Final)
	}
	second := must(f.st.FlushLedger(ctx, []proxy.LedgerEntry{settled("c", 90), settled("a", 80), held("b")}))(t)
	if len(second.Final) != 2 || second.Final[0].RequestID != "c" || second.Final[1].RequestID != "a" {
		t.Fatalf("final after the second batch = %v, want c then a (the batch's order)", second.Final)
	}
	if _, err := f.st.FlushLedger(ctx, []proxy.LedgerEntry{held("d"), held("d")}); err == nil {
		t.Fatal("a batch naming one request twice was written")
	}

	rows := map[string]proxy.LedgerEntry{}
	for _, e := range must(f.st.Ledger(ctx, f.team.ID, nil, t0.Add(-time.Hour), 10))(t) {
		rows[e.RequestID] = e
	}
	if len(rows) != 3 {
		t.Fatalf("rows = %v, want a, b and c only", rows)
	}
	for id, cost := range map[string]int64{"a": 80, "b": 70, "c": 90} {
		want := settled(id, cost)
		want.Epoch, want.Seq = 0, 0 // not stored on the row
		if got := rows[id]; got.Status != want.Status || got.CostMicros != cost || got.HTTPStatus != 200 ||
			!got.SettledAt.Equal(want.SettledAt) || got.Usage != want.Usage || got.HeldMicros != 500 {
			t.Errorf("row %s = %+v, want %+v", id, got, want)
		}
	}

	// Held and nothing else yet: no route, status or settle time, stored as NULL.
	must(f.st.FlushLedger(ctx, []proxy.LedgerEntry{held("e")}))(t)
	var unset bool
	if err := f.pool.QueryRow(ctx, `SELECT route_id IS NULL AND http_status IS NULL AND settled_at IS NULL AND status = 'held'
		FROM ledger WHERE team_id = $1 AND request_id = 'e'`, f.team.ID).Scan(&unset); err != nil || !unset {
		t.Errorf("held row: route, HTTP status and settle time NULL and status held = %v (%v), want true", unset, err)
	}
}
