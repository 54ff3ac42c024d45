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
// team's hash tag (one Cluster slot, no CROSSSLOT), windows and concurrency sets
// expire, so an idle member leaves only its fields in the team hash; the team hash
// persists, and the leases set holds only the holds still outstanding.
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
	// Concurrency sets outlive the lease by up to 30 s, so that their TTLs are
	// extended only every 30 s.
	const lease = time.Minute + 30*time.Second
	want := map[string]time.Duration{ // suffix → longest TTL; -1: persists
		"h": -1, "leases": -1,
		"m:7:sw": time.Minute, "m:7:conc": lease, "team:sw": time.Minute, "team:conc": lease,
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

// TestSettledKeysKeepTheirTTL settles every request: the concurrency set keeps a
// sentinel, so it never empties and gets recreated without a TTL, and the leases set
// empties and is gone.
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
	if k, ok := got[prefix+"{t:7}:m:ada:conc"]; !ok || k.ttl <= 0 {
		t.Errorf("m:ada:conc after every settle: present %t, TTL %s; want it kept with a TTL", ok, k.ttl)
	}
	if _, ok := got[prefix+"{t:7}:leases"]; ok {
		t.Errorf("leases after every settle: present, want it gone")
	}
}
