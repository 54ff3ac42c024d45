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
// idle member leaks nothing; only the revoked and cut-off sets persist.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := limiter.NewRedis(client, limiter.RedisOptions{Prefix: prefix, Timeout: testTimeout})
	for _, rate := range []*limiter.Rate{tokenBucket(10, time.Minute, 0), slidingWindow(10, time.Minute)} {
		admit(t, l, limiter.Request{Team: "42", Member: "7", KeyID: "k", Lease: time.Minute,
			MemberPolicy: limiter.Policy{Rate: rate, Concurrency: 2},
			TeamPolicy:   limiter.Policy{Rate: rate, Concurrency: 5}})
	}
	if err := l.SetKeyRevoked(ctx, "42", "old-key", true); err != nil {
		t.Fatal(err)
	}
	if err := l.SetMemberCutOff(ctx, "42", "8", true); err != nil {
		t.Fatal(err)
	}

	got := takeSnapshot(t, client, prefix)
	want := map[string]bool{ // suffix → persists
		"revoked": true, "cutoff": true,
		"m:7:tb": false, "m:7:sw": false, "m:7:conc": false,
		"team:tb": false, "team:sw": false, "team:conc": false,
	}
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(got), len(want), got)
	}
	for suffix, persists := range want {
		key := prefix + "{t:42}:" + suffix
		k, ok := got[key]
		switch {
		case !ok:
			t.Errorf("missing %s", key)
		case persists && k.ttl != -1:
			t.Errorf("%s expires in %s, want it kept", key, k.ttl)
		case !persists && (k.ttl <= 0 || k.ttl > time.Minute+15*time.Second):
			t.Errorf("%s TTL %s, want about a minute", key, k.ttl)
		}
	}
	for key := range got {
		rest := strings.TrimPrefix(key, prefix)
		if tag := rest[strings.Index(rest, "{")+1 : strings.Index(rest, "}")]; tag != "t:42" {
			t.Errorf("%s hashes on %q, want t:42", key, tag)
		}
	}
}
