package limiter

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Key layout. Every key of a team carries the hash tag {t:<team>}, so one team's
// script touches a single Cluster slot:
//
//	<prefix>{t:<team>}:revoked           SET of revoked key ids
//	<prefix>{t:<team>}:cutoff            SET of cut-off members
//	<prefix>{t:<team>}:m:<member>:tb     HASH tokens, ts, period   (token bucket)
//	<prefix>{t:<team>}:m:<member>:sw     ZSET request id → time    (sliding window)
//	<prefix>{t:<team>}:m:<member>:conc   ZSET request id → lease expiry
//	<prefix>{t:<team>}:team:tb | :team:sw | :team:conc   the same for the team
//
// Times are microseconds of the script's clock. Counters get PEXPIRE, so an idle
// member's keys disappear once they would read as empty.

// admitScript is ADMIT, run as one EVALSHA (EVAL on NOSCRIPT) per request.
//
//	KEYS  revoked, cutoff, member rate, member conc, team rate, team conc
//	ARGV  1 now µs ("" = Redis TIME), 2 key id, 3 member, 4 request id, 5 lease µs,
//	      6 concurrency retry cap µs, 7 TTL slack µs,
//	      8-12 member policy, 13-17 team policy: algorithm (0 none, 1 token bucket,
//	      2 sliding window), limit, period µs, burst, concurrency cap (0 none)
//	reply allowed (0|1), reason (0 allowed, 1 rate, 2 concurrency, 3 revoked,
//	      4 cut_off), scope (0 none, 1 member, 2 team), limit, remaining,
//	      reset µs, retry-after µs; later fields are appended, never reordered.
//
//go:embed admit.lua
var admitSource string
var admitScript = redis.NewScript(admitSource)

// releaseScript is RELEASE. KEYS member conc, team conc; ARGV request id.
//
//go:embed release.lua
var releaseSource string
var releaseScript = redis.NewScript(releaseSource)

var (
	replyReasons = [...]Reason{"", ReasonRate, ReasonConcurrency, ReasonRevoked, ReasonCutOff}
	replyScopes  = [...]Scope{"", ScopeMember, ScopeTeam}
)

// ttlSlack keeps a counter key a little past the moment it reads as empty. With Redis
// TIME no slack is needed; tests that inject now advance it by their own schedule,
// and the slack keeps their keys alive between steps.
const ttlSlack = 10 * time.Second

// DefaultTimeout bounds each Redis call when RedisOptions.Timeout is zero.
const DefaultTimeout = 50 * time.Millisecond

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// Prefix starts every key, e.g. "tg:". It must not contain '{' or '}', which would
	// take the place of the team's Cluster hash tag.
	Prefix string
	// Timeout bounds every call to Redis; DefaultTimeout when zero. The client must set
	// ContextTimeoutEnabled, or socket reads wait out its ReadTimeout instead.
	Timeout time.Duration
	// Replicas is how many gateway replicas share the limits; a fail-open decision is
	// taken alone at each limit divided by it. 1 when zero.
	Replicas int
	// Now replaces Redis TIME inside the scripts. Tests only: replicas' clocks differ.
	Now func() time.Time
}

// Redis is the Limiter that gateway replicas share: exact across replicas because
// each decision is one atomic script in Redis. It needs Redis 5 or later, where scripts
// replicate their effects and may write after reading TIME.
type Redis struct {
	client   redis.UniversalClient
	prefix   string
	timeout  time.Duration
	replicas int64
	now      func() time.Time // injected script clock; nil means Redis TIME

	// fallback decides fail-open requests while Redis is unreachable.
	fallback *Local
	refusals refusalCache

	failOpenAllowed, failOpenRefused, failClosed, cachedRefusals atomic.Uint64
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a Limiter on client.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	r := &Redis{client: client, prefix: opts.Prefix, timeout: opts.Timeout, replicas: int64(opts.Replicas), now: opts.Now}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	r.replicas = max(r.replicas, 1)
	r.fallback = NewLocal(r.clock)
	return r
}

// clock is the local time: for the refusal cache and the fail-open twin.
func (r *Redis) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// Stats counts the decisions taken without asking Redis.
type Stats struct {
	FailOpenAllowed uint64 // Redis unreachable, admitted by the local twin
	FailOpenRefused uint64 // Redis unreachable, refused by the local twin
	FailClosed      uint64 // Redis unreachable, refused as unavailable
	CachedRefusals  uint64 // refused from the over-limit cache
}

// Stats returns the counts since NewRedis.
func (r *Redis) Stats() Stats {
	return Stats{
		FailOpenAllowed: r.failOpenAllowed.Load(),
		FailOpenRefused: r.failOpenRefused.Load(),
		FailClosed:      r.failClosed.Load(),
		CachedRefusals:  r.cachedRefusals.Load(),
	}
}

// Admit decides req with one script call, unless a cached rate refusal still holds.
//
// When Redis fails or exceeds the timeout, a FailOpen request is decided by the local
// twin (Degraded, nil error) and any other is refused with ReasonUnavailable and an
// error wrapping the cause. An invalid request is an error, never admitted.
func (r *Redis) Admit(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, fmt.Errorf("limiter: admit: %w", err)
	}
	sent := r.clock()
	if d, ok := r.refusals.get(&req, sent); ok {
		r.cachedRefusals.Add(1)
		return d, nil
	}
	d, err := r.admit(ctx, &req)
	if err != nil {
		return r.degrade(ctx, req, fmt.Errorf("limiter: admit %s/%s: %w", req.Team, req.Member, err))
	}
	r.refusals.put(&req, d, sent)
	return d, nil
}

func (r *Redis) admit(ctx context.Context, req *Request) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.teamBase(req.Team)
	member := base + "m:" + req.Member + ":"
	keys := []string{
		base + "revoked", base + "cutoff",
		member + rateSuffix(req.MemberPolicy.Rate), member + "conc",
		base + "team:" + rateSuffix(req.TeamPolicy.Rate), base + "team:conc",
	}
	now := ""
	if r.now != nil {
		now = strconv.FormatInt(r.now().UnixMicro(), 10)
	}
	args := make([]any, 0, 17)
	args = append(args, now, req.KeyID, req.Member, req.RequestID, micros(req.Lease),
		micros(concurrencyRetryCap), micros(ttlSlack))
	args = appendPolicy(args, req.MemberPolicy)
	args = appendPolicy(args, req.TeamPolicy)
	v, err := admitScript.Run(ctx, r.client, keys, args...).Int64Slice()
	if err != nil {
		return Decision{}, err
	}
	if len(v) < 7 || v[1] < 0 || v[1] >= int64(len(replyReasons)) || v[2] < 0 || v[2] >= int64(len(replyScopes)) {
		return Decision{}, fmt.Errorf("unexpected admit reply %v", v)
	}
	return Decision{
		Allowed:    v[0] == 1,
		Reason:     replyReasons[v[1]],
		Scope:      replyScopes[v[2]],
		Limit:      v[3],
		Remaining:  v[4],
		Reset:      time.Duration(v[5]) * time.Microsecond,
		RetryAfter: time.Duration(v[6]) * time.Microsecond,
	}, nil
}

func appendPolicy(args []any, p Policy) []any {
	algo, limit, period, burst := 0, int64(0), int64(0), int64(0)
	if r := p.Rate; r != nil {
		algo = 1
		if r.Algorithm == AlgorithmSlidingWindow {
			algo = 2
		}
		limit, period, burst = r.Limit, micros(r.Period), r.burst()
	}
	return append(args, algo, limit, period, burst, p.Concurrency)
}

// rateSuffix keeps the two algorithms' state in keys of their own type, so switching a
// policy's algorithm starts afresh instead of failing with WRONGTYPE.
func rateSuffix(r *Rate) string {
	if r != nil && r.Algorithm == AlgorithmSlidingWindow {
		return "sw"
	}
	return "tb"
}

func (r *Redis) teamBase(team string) string { return r.prefix + "{t:" + team + "}:" }

// degrade decides req without Redis after cause.
func (r *Redis) degrade(ctx context.Context, req Request, cause error) (Decision, error) {
	// A caller that gave up is not an outage: nothing to decide.
	if !req.FailOpen || ctx.Err() != nil {
		r.failClosed.Add(1)
		return Decision{Reason: ReasonUnavailable, RetryAfter: unavailableRetry}, cause
	}
	req.MemberPolicy = req.MemberPolicy.share(r.replicas)
	req.TeamPolicy = req.TeamPolicy.share(r.replicas)
	d, err := r.fallback.Admit(ctx, req)
	if err != nil {
		return d, err
	}
	d.Degraded = true
	if d.Allowed {
		r.failOpenAllowed.Add(1)
	} else {
		r.failOpenRefused.Add(1)
	}
	return d, nil
}

// Release frees the request's concurrency slots with one script call; releasing twice
// is harmless.
func (r *Redis) Release(ctx context.Context, team, member, requestID string) error {
	// The slot may have come from the twin while Redis was unreachable.
	_ = r.fallback.Release(ctx, team, member, requestID)
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.teamBase(team)
	keys := []string{base + "m:" + member + ":conc", base + "team:conc"}
	if err := releaseScript.Run(ctx, r.client, keys, requestID).Err(); err != nil {
		return fmt.Errorf("limiter: release %s/%s %s: %w", team, member, requestID, err)
	}
	return nil
}

// SetKeyRevoked records in Redis that the team's key is revoked (or not), which every
// replica's next Admit checks.
func (r *Redis) SetKeyRevoked(ctx context.Context, team, keyID string, revoked bool) error {
	// The twin learns it too, for the fail-open decisions it takes while Redis is down.
	_ = r.fallback.SetKeyRevoked(ctx, team, keyID, revoked)
	r.refusals.forgetTeam(team)
	if err := r.setFlag(ctx, r.teamBase(team)+"revoked", keyID, revoked); err != nil {
		return fmt.Errorf("limiter: revoke key %s/%s: %w", team, keyID, err)
	}
	return nil
}

// SetMemberCutOff records in Redis that the team's member is cut off (or restored),
// which every replica's next Admit checks.
func (r *Redis) SetMemberCutOff(ctx context.Context, team, member string, cutOff bool) error {
	_ = r.fallback.SetMemberCutOff(ctx, team, member, cutOff)
	r.refusals.forgetTeam(team)
	if err := r.setFlag(ctx, r.teamBase(team)+"cutoff", member, cutOff); err != nil {
		return fmt.Errorf("limiter: cut off member %s/%s: %w", team, member, err)
	}
	return nil
}

func (r *Redis) setFlag(ctx context.Context, key, name string, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if on {
		return r.client.SAdd(ctx, key, name).Err()
	}
	return r.client.SRem(ctx, key, name).Err()
}
