package limiter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestKeyLayout checks what one team's traffic leaves in Redis: every key carries the
// team's hash tag (one Cluster slot, no CROSSSLOT), and every counter expires, so an
// idle member leaks nothing; only revocations, cut-offs, the rebuild marker and the
// total spend persist.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout})
	rebuildEmpty(t, l, "42", nil)
	for i, rate := range []*limiter.Rate{tokenBucket(10, time.Minute, 0), slidingWindow(10, time.Minute)} {
		budget := []limiter.Period{limiter.PeriodDaily, limiter.PeriodMonthly}[i]
		req := limiter.Request{Team: "42", Member: "7", KeyID: "k", Lease: time.Minute, RequestID: rid(),
			Hold: 5, Tokens: 10,
			MemberPolicy: limiter.Policy{Rate: rate, Concurrency: 2, TokensPerMinute: 100,
				Budget: &limiter.Budget{Limit: 100, Period: budget}},
			TeamPolicy: limiter.Policy{Rate: rate, Concurrency: 5, TokensPerMinute: 1000,
				Budget: &limiter.Budget{Limit: 1000, Period: limiter.PeriodTotal}}}
		admit(t, l, req)
		if i == 0 {
			settle(t, l, limiter.Settlement{Team: "42", Member: "7", RequestID: req.RequestID, Cost: 3, Tokens: 8})
		}
	}
	if err := l.SetKeyRevoked(ctx, "42", "old-key", true); err != nil {
		t.Fatal(err)
	}
	if err := l.SetMemberCutOff(ctx, "42", "8", true); err != nil {
		t.Fatal(err)
	}

	got := takeSnapshot(t, client, prefix)
	// Concurrency sets, holds and leases (and the st string that tracks a set's TTL)
	// outlive the lease by up to 30 s, so that their TTLs are extended only every 30 s.
	const lease = time.Minute + 30*time.Second
	want := map[string]time.Duration{ // suffix → longest TTL; -1: persists
		"revoked:old-key": -1, "cutoff:8": -1, "epoch": -1, "spend:total": -1,
		"m:7:st": lease, "m:7:sw": time.Minute, "m:7:conc": lease, "m:7:tpm": time.Minute,
		"team:st": lease, "team:sw": time.Minute, "team:conc": lease, "team:tpm": time.Minute,
		"holds": lease, "leases": lease, "settled": limiter.SettledWindow,
		"spend:daily": 24 * time.Hour, "spend:monthly": 31 * 24 * time.Hour,
	}
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(got), len(want), got)
	}
	for suffix, longest := range want {
		key := prefix + "{t:42}:" + suffix
		k, ok := got[key]
		switch {
		case !ok:
			t.Errorf("missing %s", key)
		case longest == -1 && k.ttl != -1:
			t.Errorf("%s expires in %s, want it kept", key, k.ttl)
		case longest != -1 && (k.ttl <= 0 || k.ttl > longest+15*time.Second):
			t.Errorf("%s TTL %s, want up to %s", key, k.ttl, longest)
		}
	}
	for key := range got {
		rest := strings.TrimPrefix(key, prefix)
		if tag := rest[strings.Index(rest, "{")+1 : strings.Index(rest, "}")]; tag != "t:42" {
			t.Errorf("%s hashes on %q, want t:42", key, tag)
		}
	}
}

// TestSettledKeysKeepTheirTTL settles every request: the concurrency set, holds and
// leases keep a sentinel, so they never empty and get recreated without a TTL.
func TestSettledKeysKeepTheirTTL(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout})
	rebuildEmpty(t, l, "7", nil)
	for range 3 {
		req := limiter.Request{Team: "7", Member: "ada", RequestID: rid(), Lease: time.Minute, Hold: 1, Tokens: 1,
			MemberPolicy: limiter.Policy{Concurrency: 2, Budget: budget(dollar, limiter.PeriodTotal), TokensPerMinute: 10}}
		d := admit(t, l, req)
		settle(t, l, limiter.Settlement{Team: "7", Member: "ada", RequestID: req.RequestID, Cost: 1, Tokens: 1, Epoch: d.Epoch})
	}
	got := takeSnapshot(t, client, prefix)
	for _, suffix := range []string{"m:ada:conc", "holds", "leases"} {
		if k, ok := got[prefix+"{t:7}:"+suffix]; !ok || k.ttl <= 0 {
			t.Errorf("%s after every settle: present %t, TTL %s; want it kept with a TTL", suffix, ok, k.ttl)
		}
	}
}
