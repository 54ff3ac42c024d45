package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
)

// TestIdempotentPostsReplay: a creating POST retried with the same
// Idempotency-Key and body gets the first response and creates nothing more;
// the same key with another body is a 422; keys are per team; a response that
// carried a secret is never stored, so its replay is a 409 naming what was made.
func TestIdempotentPostsReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme, beta := e.team("acme"), e.team("beta")
	owner, betaOwner := e.token(&acme.ID, store.TokenRoleOwner), e.token(&beta.ID, store.TokenRoleOwner)

	body := map[string]any{"name": "bots"}
	first := e.call(owner, http.MethodPost, "/api/v1/tiers", body, "Idempotency-Key", "add-bots")
	before := e.auditCount()
	again := e.call(owner, http.MethodPost, "/api/v1/tiers", body, "Idempotency-Key", "add-bots")
	if first.status != http.StatusCreated || again.status != first.status || string(again.body) != string(first.body) {
		t.Fatalf("replay: %d %s, want the first response %d %s", again.status, again.body, first.status, first.body)
	}
	if again.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("Idempotent-Replayed: first %q, replay %q", first.header.Get("Idempotent-Replayed"), again.header.Get("Idempotent-Replayed"))
	}
	if after := e.auditCount(); after != before {
		t.Errorf("the replay wrote %d audit rows", after-before)
	}
	if p := e.call(owner, http.MethodPost, "/api/v1/tiers", map[string]any{"name": "other"},
		"Idempotency-Key", "add-bots").problem(t, http.StatusUnprocessableEntity); p.Type != "urn:tollgate:problem:idempotency-key-reused" {
		t.Errorf("same key, other body: %+v", p)
	}
	if p := e.call(owner, http.MethodPost, "/api/v1/routes", map[string]any{"preset": "openai", "upstream_url": "http://127.0.0.1:1"},
		"Idempotency-Key", "add-bots").problem(t, http.StatusUnprocessableEntity); p.Type != "urn:tollgate:problem:idempotency-key-reused" {
		t.Errorf("same key, other operation: %+v", p)
	}
	if r := e.call(betaOwner, http.MethodPost, "/api/v1/tiers", body, "Idempotency-Key", "add-bots"); r.status != http.StatusCreated {
		t.Errorf("another team's request under the same key: %d %s, want it served", r.status, r.body)
	}
	// Without a key, the same request is simply served again.
	e.call(owner, http.MethodPost, "/api/v1/tiers", body).problem(t, http.StatusConflict)

	// A member added comes with an invite link, shown once: its replay names the member, not the link.
	added := e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": "grace@acme.test"}, "Idempotency-Key", "add-grace")
	var m struct {
		store.Member
		InviteLink string `json:"invite_link"`
	}
	added.decode(t, &m)
	replayed := e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": "grace@acme.test"}, "Idempotency-Key", "add-grace")
	if p := replayed.problem(t, http.StatusConflict); p.Type != "urn:tollgate:problem:idempotency-secret-shown" ||
		!strings.Contains(p.Detail, "grace@acme.test") || m.InviteLink == "" || strings.Contains(string(replayed.body), m.InviteLink) {
		t.Errorf("replay of an added member: %+v (link %q), want a 409 naming the member without the link", p, m.InviteLink)
	}

	// A key's plaintext is shown once, so its response is not kept for a replay.
	path := "/api/v1/members/" + strconv.FormatInt(m.ID, 10) + "/keys"
	issued := e.call(owner, http.MethodPost, path, map[string]any{"name": "ci"}, "Idempotency-Key", "key-1")
	var k store.IssuedKey
	issued.decode(t, &k)
	replay := e.call(owner, http.MethodPost, path, map[string]any{"name": "ci"}, "Idempotency-Key", "key-1")
	if p := replay.problem(t, http.StatusConflict); p.Type != "urn:tollgate:problem:idempotency-secret-shown" || !strings.Contains(p.Detail, k.ID) {
		t.Errorf("replay of an issued key: %+v, want a 409 naming key %s", p, k.ID)
	}
	if strings.Contains(string(replay.body), k.Plaintext) {
		t.Error("the replay shows the key's plaintext again")
	}
	keys, err := e.st.Keys(context.Background(), acme.ID)
	if err != nil || len(keys) != 1 {
		t.Errorf("keys after a replayed issue: %d (%v), want 1", len(keys), err)
	}
	var stored int
	if err := dbtest.Pool(t, e.dbURL).QueryRow(context.Background(), "SELECT count(*) FROM api_idempotency WHERE position($1 in convert_from(body, 'UTF8')) > 0",
		k.Plaintext).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("%d stored responses hold the key's plaintext (%v)", stored, err)
	}
}

// TestConcurrentRotationsOneWins: of concurrent rotations of one key through
// the API, exactly one is 201 and every other a 409.
func TestConcurrentRotationsOneWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r := e.call(owner, http.MethodPost, "/api/v1/keys/"+f.key.ID+"/rotate", nil)
			statuses[i] = r.status
			if r.status == http.StatusConflict {
				if p := r.problem(t, http.StatusConflict); p.Type != "urn:tollgate:problem:stale-state" {
					t.Errorf("losing rotation: %+v", p)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
		default:
			t.Errorf("a rotation answered %d", s)
		}
	}
	if won != 1 {
		t.Errorf("%d rotations won (%v), want exactly 1", won, statuses)
	}
}

// TestClientRoundTrip drives a member through create, limits, key, revoke,
// cut-off and restore with the client that validates every response against
// the served document (env.call), and checks the audit log names the token.
func TestClientRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)

	var m store.Member
	e.call(owner, http.MethodPost, "/api/v1/members", map[string]any{"email": "ada@acme.test"}).decode(t, &m)
	id := strconv.FormatInt(m.ID, 10)
	limits := map[string]any{"rate_limit": 60, "rate_period_ms": 60000, "concurrency": 2, "budget_micros": 5_000_000, "budget_period": "daily"}
	if r := e.call(owner, http.MethodPatch, "/api/v1/members/"+id+"/limits", limits); r.status != http.StatusOK {
		t.Fatalf("set limits: %d %s", r.status, r.body)
	}
	var got map[string]any
	e.call(owner, http.MethodGet, "/api/v1/members/"+id+"/limits", nil).decode(t, &got)
	for k, v := range limits {
		if n, ok := v.(int); ok && got[k] != float64(n) || !ok && got[k] != v {
			t.Errorf("limits read back %s = %v, want %v", k, got[k], v)
		}
	}
	var k store.IssuedKey
	e.call(owner, http.MethodPost, "/api/v1/members/"+id+"/keys", map[string]any{"name": "laptop"}).decode(t, &k)
	if !strings.HasPrefix(k.Plaintext, "tg_"+k.ID+"_") || k.MemberID != m.ID {
		t.Fatalf("issued key %+v", k)
	}
	var listed struct{ Keys []store.Key }
	e.call(owner, http.MethodGet, "/api/v1/keys?member_id="+id, nil).decode(t, &listed)
	if len(listed.Keys) != 1 || listed.Keys[0].ID != k.ID || strings.Contains(e.call(owner, http.MethodGet, "/api/v1/keys", nil).String(), k.Plaintext) {
		t.Fatalf("listed keys %+v, want the one key without its plaintext", listed.Keys)
	}
	var revoked store.Key
	e.call(owner, http.MethodPost, "/api/v1/keys/"+k.ID+"/revoke", nil).decode(t, &revoked)
	if revoked.RevokedAt == nil {
		t.Errorf("revoked key %+v has no revoked_at", revoked)
	}
	var cut, restored store.Member
	e.call(owner, http.MethodPost, "/api/v1/members/"+id+"/cut-off", nil).decode(t, &cut)
	e.call(owner, http.MethodPost, "/api/v1/members/"+id+"/restore", nil).decode(t, &restored)
	if cut.Status != store.StatusDisabled || restored.Status != store.StatusActive {
		t.Errorf("cut off %s, restored %s", cut.Status, restored.Status)
	}

	var audit struct {
		Entries []struct{ Actor, Action string }
	}
	e.call(owner, http.MethodGet, "/api/v1/audit?limit=100", nil).decode(t, &audit)
	actions := map[string]bool{}
	for _, a := range audit.Entries {
		// The fixture's own writes: the team, its token, and its choice of no defaults.
		fixture := a.Actor == "cli" && (a.Action == "team.default_tier" || a.Action == "team.limits")
		if a.Action != "team.create" && a.Action != "admin_token.create" && !fixture {
			actions[a.Action] = true
			if !strings.HasPrefix(a.Actor, "token:") || !strings.HasSuffix(a.Actor, ":test-owner") {
				t.Errorf("%s audited as %q, want the token's id and name", a.Action, a.Actor)
			}
		}
	}
	for _, want := range []string{"member.add", "member.limits", "key.issue", "key.revoke", "member.status"} {
		if !actions[want] {
			t.Errorf("no %s in the audit log: %v", want, actions)
		}
	}
}

func (r response) String() string { return string(r.body) }

// TestUsageAndAuditPages: the ledger and the audit log page newest first, each
// row once, with the usage filters applied.
func TestUsageAndAuditPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	bob, err := e.st.AddMember(context.Background(), store.ActorCLI, acme.ID, "bob@acme.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	read := e.token(&acme.ID, store.TokenRoleRead)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	var entries []proxy.LedgerEntry
	for i := range 7 {
		m, key := f.member.ID, f.key.ID
		if i%3 == 2 {
			m, key = bob.ID, "bob-key"
		}
		status := proxy.LedgerSettled
		if i == 6 {
			status = proxy.LedgerHeld
		}
		entries = append(entries, proxy.LedgerEntry{TeamID: acme.ID, RequestID: "req-" + strconv.Itoa(i), MemberID: m, KeyID: key,
			Model: "claude-sonnet-4-5", Status: status, CostMicros: int64(i), CreatedAt: base.Add(time.Duration(i/2) * time.Minute)})
	}
	if err := e.st.WriteLedger(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Rows []struct {
			RequestID string `json:"request_id"`
		}
		NextCursor string `json:"next_cursor"`
	}
	walk := func(q string) []string {
		var ids []string
		cursor := ""
		for range 20 {
			var p page
			e.call(read, http.MethodGet, "/api/v1/usage"+q+"&cursor="+cursor, nil).decode(t, &p)
			for _, r := range p.Rows {
				ids = append(ids, r.RequestID)
			}
			if p.NextCursor == "" {
				return ids
			}
			cursor = p.NextCursor
		}
		t.Fatal("usage pages never end")
		return nil
	}
	if got := strings.Join(walk("?limit=2"), ","); got != "req-6,req-5,req-4,req-3,req-2,req-1,req-0" {
		t.Errorf("pages of 2: %s, want every row once, newest first", got)
	}
	if got := strings.Join(walk("?limit=2&member_id="+strconv.FormatInt(bob.ID, 10)), ","); got != "req-5,req-2" {
		t.Errorf("one member's rows: %s", got)
	}
	if got := strings.Join(walk("?limit=10&status=held"), ","); got != "req-6" {
		t.Errorf("held rows: %s", got)
	}
	if got := strings.Join(walk(query("limit", "10", "since", base.Add(2*time.Minute).Format(time.RFC3339Nano))), ","); got != "req-6,req-5,req-4" {
		t.Errorf("rows since: %s", got)
	}

	var seen []int64
	cursor := ""
	for range 50 {
		var p struct {
			Entries []struct {
				ID int64 `json:"id"`
			}
			NextCursor string `json:"next_cursor"`
		}
		e.call(read, http.MethodGet, "/api/v1/audit?limit=3&cursor="+cursor, nil).decode(t, &p)
		for _, a := range p.Entries {
			if len(seen) > 0 && a.ID >= seen[len(seen)-1] {
				t.Errorf("audit id %d after %d: not newest first", a.ID, seen[len(seen)-1])
			}
			seen = append(seen, a.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	all, err := e.st.Audit(context.Background(), &acme.ID, 1000)
	if err != nil || len(seen) != len(all) {
		t.Errorf("audit pages gave %d entries, the team has %d (%v)", len(seen), len(all), err)
	}
}

// TestReconcileComparesCounters: with Redis, reconcile reports a budget whose
// Redis counter disagrees with the ledger; without it, it says what it could
// not check rather than reporting agreement.
func TestReconcileComparesCounters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0", "REDIS_KEY_PREFIX": redistest.Prefix(t)})
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	read := e.token(&acme.ID, store.TokenRoleRead)
	type report struct {
		OK         bool     `json:"ok"`
		Mismatches []string `json:"mismatches"`
		NotChecked []string `json:"not_checked"`
	}
	var clean report
	e.call(read, http.MethodGet, "/api/v1/reconcile", nil).decode(t, &clean)
	if !clean.OK || len(clean.Mismatches) != 0 || len(clean.NotChecked) != 0 {
		t.Fatalf("idle team without spend: %+v, want ok", clean)
	}
	budget := int64(10_000_000)
	if _, err := e.st.SetMemberLimits(context.Background(), store.ActorCLI, acme.ID, f.member.ID, store.Limits{Budget: &budget, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	// Spend the ledger knows of and Redis never counted.
	if err := e.st.WriteLedger(context.Background(), []proxy.LedgerEntry{{TeamID: acme.ID, RequestID: "r1", MemberID: f.member.ID, KeyID: f.key.ID,
		Model: "claude-sonnet-4-5", Status: proxy.LedgerSettled, CostMicros: 1234, CreatedAt: time.Now(), SettledAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	var off report
	e.call(read, http.MethodGet, "/api/v1/reconcile", nil).decode(t, &off)
	if off.OK || len(off.Mismatches) != 1 || !strings.Contains(off.Mismatches[0], "ada@acme.test") || !strings.Contains(off.Mismatches[0], "1234") {
		t.Errorf("a counter behind the ledger: %+v, want one mismatch naming ada and 1234", off)
	}

	local := newEnv(t, nil)
	beta := local.team("beta")
	var unchecked report
	local.call(local.token(&beta.ID, store.TokenRoleRead), http.MethodGet, "/api/v1/reconcile", nil).decode(t, &unchecked)
	if unchecked.OK || len(unchecked.NotChecked) != 1 {
		t.Errorf("without Redis: %+v, want not ok and what was not checked", unchecked)
	}
}
