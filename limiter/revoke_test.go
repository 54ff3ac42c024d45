package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestRevocationAcrossReplicas revokes and cuts off through replica B and expects
// replica A, warm and on its own connection pool, to refuse at its next request.
func TestRevocationAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, prefix, nil), newRedis(t, prefix, nil)
	rate := limiter.Policy{Rate: tokenBucket(1000, time.Hour, 0)}
	req := func(team, member, key string) limiter.Request {
		return limiter.Request{Team: team, Member: member, KeyID: key, MemberPolicy: rate, TeamPolicy: rate}
	}
	expect := func(t *testing.T, r limiter.Request, want limiter.Reason) {
		t.Helper()
		d := admit(t, a, r)
		if d.Allowed != (want == "") || d.Reason != want {
			t.Fatalf("%s/%s key %s: %+v, want reason %q", r.Team, r.Member, r.KeyID, d, want)
		}
	}

	t.Run("RevokedKey", func(t *testing.T) {
		expect(t, req("t1", "ada", "k1"), "")
		if err := b.SetKeyRevoked(ctx, "t1", "k1", true); err != nil {
			t.Fatal(err)
		}
		expect(t, req("t1", "ada", "k1"), limiter.ReasonRevoked)
		expect(t, req("t1", "ada", "k2"), "") // the member's other key
		expect(t, req("t2", "ada", "k1"), "") // another team's key with the same id
		if err := b.SetKeyRevoked(ctx, "t1", "k1", false); err != nil {
			t.Fatal(err)
		}
		expect(t, req("t1", "ada", "k1"), "")
	})
	t.Run("CutOffMember", func(t *testing.T) {
		expect(t, req("t3", "ada", "k1"), "")
		if err := b.SetMemberCutOff(ctx, "t3", "ada", true); err != nil {
			t.Fatal(err)
		}
		expect(t, req("t3", "ada", "k1"), limiter.ReasonCutOff)
		expect(t, req("t3", "ada", "k2"), limiter.ReasonCutOff)
		expect(t, req("t3", "bob", "k3"), "")
		expect(t, req("t4", "ada", "k1"), "")
		if err := b.SetMemberCutOff(ctx, "t3", "ada", false); err != nil {
			t.Fatal(err)
		}
		expect(t, req("t3", "ada", "k1"), "")
	})
	t.Run("RevokedWhileOverLimit", func(t *testing.T) {
		// A's over-limit cache keeps refusing (as a rate refusal) until its deadline;
		// a revocation through A itself shows at once.
		over := limiter.Request{Team: "t5", Member: "ada", KeyID: "k1", MemberPolicy: limiter.Policy{Rate: tokenBucket(1, time.Hour, 0)}}
		admit(t, a, over)
		if d := admit(t, a, over); d.Reason != limiter.ReasonRate {
			t.Fatalf("%+v, want a rate refusal", d)
		}
		if err := b.SetKeyRevoked(ctx, "t5", "k1", true); err != nil {
			t.Fatal(err)
		}
		if d := admit(t, a, over); d.Allowed {
			t.Fatalf("%+v, want refused", d)
		}
		if err := a.SetKeyRevoked(ctx, "t5", "k1", true); err != nil {
			t.Fatal(err)
		}
		if d := admit(t, a, over); d.Reason != limiter.ReasonRevoked {
			t.Fatalf("%+v, want revoked", d)
		}
	})
}
