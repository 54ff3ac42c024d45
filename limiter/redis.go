package limiter

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Key layout. Every key of a team carries the hash tag {t:<team>}, so one team's
// scripts touch a single Cluster slot, and every key a script touches is in its KEYS:
//
//	<prefix>{t:<team>}:h                  HASH the team's state, fields below; no TTL
//	<prefix>{t:<team>}:m:<member>:sw      ZSET request id → time     (sliding window)
//	<prefix>{t:<team>}:m:<member>:conc    ZSET request id → lease expiry, and "" → -inf
//	<prefix>{t:<team>}:team:sw | :team:conc                     the same for the team
//	<prefix>{t:<team>}:leases             ZSET request id → hold lease expiry
//	<prefix>{t:<team>}:settled            ZSET request id → time swept or charged lost
//	<prefix>{t:<team>}:queue              ZSET request id → start tag (the waiting room)
//	<prefix>{t:<team>}:counted            ZSET request ids whose spend the counters count
//	                                      beyond the ledger rows they were rebuilt from
//
// The team hash's fields, "<member>" standing for the member's id:
//
//	k:<key id>      "1" while the key is revoked
//	c:<member>      "1" while the member is cut off
//	e               the epoch: the generation of the counters (see Rebuild), from
//	                the rebuild's time, so later for a later rebuild
//	n               seq: admissions since the rebuild (see generation)
//	g               the ledger's rebuild generation the counters were rebuilt from
//	                (see ChargeLate)
//	s:<member> | s  rate token bucket (tokens, ts, period), conc TTL deadline, conc size bound
//	q:<member> | q  TPM bucket (tokens, ts, rate)
//	o:<member> | o  total spend (0, spent)
//	d:<member> | d  daily spend (day index, spent in it)
//	m:<member> | m  monthly spend (month index, spent in it)
//	h:<member> | h  held sum
//	r:<request id>  hold record
//	x               sweep bound: no lease in leases ends before it
//	w               the waiting room: virtual time, tickets in queue, tag generation
//	t:<request id>  a ticket's lease end
//	f:<member>      the member's last finish tag and its generation
//
// Numbers are little-endian doubles (Lua's struct.pack), exact for integers below 2^53
// and far cheaper for the scripts than decimal text. One hash is what lets ADMIT read
// everything a request needs with one HMGET and write it with one HSET, and sweep any
// member's expired holds with every key in KEYS; it also means a team's counters and
// its epoch are lost together or not at all. A spend field carries its period, so a
// new period starts from zero without resetting anything. Times are microseconds of
// the script's clock. Windows and concurrency sets expire once they would read as
// empty; the state field remembers how far a conc set's TTL runs, so that the set's
// PEXPIRE is needed about once per 30 s rather than on every request, and a bound on
// the set's size, so that the set is counted only when the bound reaches the cap (a
// sentinel member keeps the set, and its TTL, from vanishing when settles empty it).
// Redis must not evict keys (maxmemory-policy noeviction): an evicted window or conc
// set would admit past a limit.
//
// A hold record is ten doubles (hold, tokens, member budget kind and period, team
// budget kind and period, member and team TPM rates, conc slots, len(member))
// followed by the member and the meta: budget kind 1 total, 2 daily, 3 monthly (0
// none) and the period index the hold counts against; the TPM rates of the buckets
// it reserved from (0 none); conc slots 1 member, 2 team, 3 both.

// admitScript is ADMIT, run as one EVALSHA (EVAL on NOSCRIPT) per request. Only the
// limits that apply are sent: a spec string lists them, and KEYS and ARGV carry theirs
// in the same order.
//
//	KEYS  h, then the sw and conc keys of the entries w and c in spec order;
//	      if the request may queue: queue; if ledger: leases, settled; if it
//	      carries settles: the member's conc, the team's conc, counted
//	ARGV  1 now µs ("" = Redis TIME), 2 member, 3 request id, 4 spec, 5 numbers,
//	      6 meta (ledger; "" otherwise), then the fields of h to read: k:<key id>,
//	      c:<member>, if ledger e, x, r:<request id>, h:<member>, h, n; then per scope
//	      (member, team) its s field if it has a token bucket or a concurrency cap,
//	      its q field if it has a TPM limit, its spend field if it has a budget;
//	      if the request may queue, w, then t:<request id> if it holds a ticket;
//	      then r:<request id> of each carried settle. Last, each carried
//	      settle's cost, tokens and epoch as doubles followed by its request id.
//	      The numbers are little-endian doubles (exact below 2^53): lease µs, if
//	      ledger hold, tokens and fit floor, then per spec entry its numbers. Spec: "$" first
//	      when any budget or TPM applies (ledger), followed by the number of
//	      settles the call carries (a digit, none when 0), then member entries in lower
//	      case, team entries in upper case: b token bucket (limit, period µs,
//	      burst), w sliding window (limit, period µs), c concurrency (cap), t TPM
//	      (tokens per minute), o | d | m budget total | daily | monthly (limit);
//	      then "~" if the request may queue, with the numbers step, wait µs and
//	      queued (0|1).
//	reply doubles: 1 allowed (0|1), 2 reason (0 allowed, 1 rate, 2 concurrency,
//	      3 revoked, 4 cut_off, 5 budget, 6 tpm, 7 rebuild, 8 queued), 3 scope (0 none,
//	      1 member, 2 team), 4 limit (queued: tickets), 5 remaining (queued:
//	      tickets ahead), 6 reset µs, 7 retry-after µs;
//	      ledger requests past the epoch check add: 8 too large (0|1), 9 budget
//	      remaining (-1 none), 10 budget scope, 11 budget resets at µs (0 none),
//	      12 the hold's epoch (0 none), 13 n expired, 14 the team's epoch, 15 seq
//	      before this call, 16 now µs, 17 the hold fit placed (0 none), then
//	      n × (hold, tokens). With expired holds the
//	      reply is an array: those doubles, then n × (request id, meta). Each
//	      carried settle's reply (SETTLE's) follows the doubles, in order.
//
//go:embed admit.lua
var admitSource string
var admitScript = redis.NewScript(periodSource + settleHoldSource + admitSource)

// settleScript is SETTLE.
//
//	KEYS  h, leases, settled, member conc, team conc, counted
//	ARGV  1 now µs ("" = Redis TIME), 2 request id, 3 member, 4 cost, tokens and
//	      epoch as little-endian doubles
//	reply applied + 2 × known + 4 × lost
//
//go:embed settle.lua
var settleSource string
var settleScript = redis.NewScript(periodSource + settleHoldSource + settleSource)

// settleHoldSource is the settle of one hold, shared by SETTLE and ADMIT.
//
//go:embed settle_hold.lua
var settleHoldSource string

// rebuildScript is REBUILD.
//
//	KEYS  h, leases, counted
//	ARGV  1 now µs ("" = Redis TIME), 2 the epoch's random part, 3 at µs, 4 the
//	      newest epoch this replica saw, 5 the ledger's rebuild generation, 6 c,
//	      then c request ids counted beyond the ledger, then n, then n flag fields (k:<key id>,
//	      c:<member>) to set, then the number of triples and (field, kind,
//	      amount) triples with field <o|d|m>:<member> or o | d | m, then the holds
//	      in flight, each (request id, member, hold expiry member-kind team-kind
//	      as doubles, meta)
//	reply 1 rebuilt, 0 already rebuilt, -1 at lies in a later period than now
//
//go:embed rebuild.lua
var rebuildSource string
var rebuildScript = redis.NewScript(periodSource + rebuildSource)

// leaveScript takes a ticket out of the waiting room.
//
//	KEYS  h, queue
//	ARGV  1 request id
//	reply 1 left, 0 held no ticket
var leaveScript = redis.NewScript(`if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[1], 't:' .. ARGV[1])
local ws = redis.call('HGET', KEYS[1], 'w')
if ws then
  local V, N, g = struct.unpack('<ddd', ws)
  if N > 0 then
    N = N - 1
  end
  redis.call('HSET', KEYS[1], 'w', struct.pack('<ddd', V, N, g))
end
return 1`)

// lateScript is LATE.
//
//	KEYS  h, counted
//	ARGV  1 now µs ("" = Redis TIME), 2 the ledger's rebuild generation the rows
//	      landed in, then per row request id, member, cost, the epoch it was
//	      admitted in
//	reply rows charged, or -1 when the team has no counters
//
//go:embed late.lua
var lateSource string
var lateScript = redis.NewScript(periodSource + lateSource)

//go:embed period.lua
var periodSource string

var (
	replyReasons = [...]Reason{"", ReasonRate, ReasonConcurrency, ReasonRevoked, ReasonCutOff,
		ReasonBudget, ReasonTPM, ReasonRebuild, ReasonQueued}
	replyScopes = [...]Scope{"", ScopeMember, ScopeTeam}
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
	// Timeout bounds every call to Redis; DefaultTimeout when zero. With Wait zero it
	// is the whole call's deadline, and the client must set ContextTimeoutEnabled, or
	// socket reads wait out its ReadTimeout instead.
	Timeout time.Duration
	// MaxCalls bounds the admissions in Redis at once from this limiter (0: no
	// bound); the rest wait their turn within Wait, and a rate refusal that comes
	// back meanwhile answers them without a call. Fewer calls queued inside Redis
	// keep each one's answer within Timeout when a burst keeps Redis busy.
	MaxCalls int
	// Wait is how much longer than Timeout a call may take in all, for a client
	// whose socket deadlines (ReadTimeout, WriteTimeout) bound Redis's answer and
	// whose PoolTimeout bounds the wait for a connection: then a burst queues for
	// the pool for up to Wait, while a Redis that does not answer still fails
	// within Timeout of the call being sent.
	Wait time.Duration
	// Replicas is how many gateway replicas share the limits; a fail-open decision is
	// taken alone at each limit divided by it. 1 when zero.
	Replicas int
	// Now replaces Redis TIME inside the scripts. Tests only: replicas' clocks differ.
	Now func() time.Time
}

// Redis is the Limiter that gateway replicas share: exact across replicas because
// each decision is one atomic script in Redis. It needs Redis 7 or later (scripts
// replicate their effects and may write after reading TIME; PEXPIRE takes GT and NX).
type Redis struct {
	client   redis.UniversalClient
	prefix   string
	timeout  time.Duration // a call's whole deadline: Timeout + Wait
	replicas int64
	now      func() time.Time // injected script clock; nil means Redis TIME

	calls chan struct{} // admission call slots (MaxCalls); nil: unbounded

	// fallback decides fail-open requests while Redis is unreachable.
	fallback *Local
	refusals refusalCache

	// seen is the newest generation of each team's hash that an admission read.
	seenMu sync.Mutex
	seen   map[string]generation

	failOpenAllowed, failOpenRefused, failClosed, cachedRefusals atomic.Uint64
	lateReleases                                                 atomic.Int64 // releaseLate goroutines running
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a Limiter on client.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	r := &Redis{client: client, prefix: opts.Prefix, timeout: opts.Timeout, replicas: int64(opts.Replicas), now: opts.Now,
		seen: map[string]generation{}}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	r.timeout += max(opts.Wait, 0)
	if opts.MaxCalls > 0 {
		r.calls = make(chan struct{}, opts.MaxCalls)
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

// Now is the clock the scripts read budget periods on: Redis TIME, or the
// injected Now. A caller that computes a period itself (the sums of a rebuild)
// reads it here, so it agrees with admission whatever its own clock says.
func (r *Redis) Now(ctx context.Context) (time.Time, error) {
	if r.now != nil {
		return r.now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.Time(ctx).Result()
}

// scriptNow is ARGV 1 of every script: the injected clock, or "" for Redis TIME.
func (r *Redis) scriptNow() string {
	if r.now == nil {
		return ""
	}
	return strconv.FormatInt(r.now().UnixMicro(), 10)
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
// When Redis fails or exceeds the timeout, a FailOpen request without budget or TPM
// is decided by the local twin (Degraded, nil error) and any other is refused with
// ReasonUnavailable and an error wrapping the cause. An invalid request is an error,
// never admitted.
func (r *Redis) Admit(ctx context.Context, req Request) (Decision, error) {
	d, _, err := r.admit(ctx, nil, req)
	return d, err
}

// AdmitAfter settles ss and admits req in one round trip. A paid request carries
// its member's settles in its ADMIT, which runs them before its checks; any
// other goes as a pipeline of their SETTLEs and the ADMIT on one connection,
// which Redis runs in that order. A refusal answered without Redis settles ss on
// its own; an admission that never reached Redis leaves them ErrSettleNotSent.
func (r *Redis) AdmitAfter(ctx context.Context, ss []Settlement, req Request) (Decision, []error, error) {
	return r.admit(ctx, ss, req)
}

func (r *Redis) admit(ctx context.Context, ss []Settlement, req Request) (Decision, []error, error) {
	notSent := func() []error {
		if len(ss) == 0 {
			return nil
		}
		errs := make([]error, len(ss))
		for i := range errs {
			errs[i] = ErrSettleNotSent
		}
		return errs
	}
	if err := req.validate(); err != nil {
		return Decision{}, notSent(), fmt.Errorf("limiter: admit: %w", err)
	}
	sent := r.clock()
	// A request holding a ticket needs the script, if only to leave the room.
	if d, ok := r.refusals.get(&req, sent); ok && !req.Queued {
		r.cachedRefusals.Add(1)
		return d, r.SettleAll(ctx, ss), nil
	}
	callCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.calls != nil {
		select {
		case r.calls <- struct{}{}:
			defer func() { <-r.calls }()
		case <-callCtx.Done():
			// Never sent: nothing to release.
			d, err := r.degrade(ctx, req, fmt.Errorf("limiter: admit %s/%s: no call slot within the wait: %w", req.Team, req.Member, callCtx.Err()))
			return d, notSent(), err
		}
		// A refusal that came back while this request waited binds it too: in a
		// burst past a rate limit, most of the queue is answered here.
		sent = r.clock()
		if d, ok := r.refusals.get(&req, sent); ok && !req.Queued {
			r.cachedRefusals.Add(1)
			return d, r.SettleAll(ctx, ss), nil
		}
	}
	before := r.seenOf(req.Team)
	d, gen, errs, err := r.admitCall(callCtx, ss, &req)
	if err == nil && gen.epoch != 0 {
		if gen.olderThan(before) {
			// The team's hash went back in time: Redis was restored from an older
			// snapshot or failed over to a replica that lagged. Its counters cannot
			// be believed; rebuild them from the ledger (which also drops the hold
			// this call just placed in them) and admit again.
			if err := r.forgetGeneration(callCtx, req.Team, gen.epoch); err != nil {
				d, err := r.degrade(ctx, req, fmt.Errorf("limiter: admit %s/%s: drop the team's stale counters: %w", req.Team, req.Member, err))
				return d, errs, err
			}
			return Decision{Reason: ReasonRebuild, BudgetRemaining: -1}, errs, nil
		}
		r.noteSeen(req.Team, gen, d.Allowed)
		d.TeamEpoch, d.Seq = gen.epoch, gen.seq
		if d.Allowed {
			d.Seq++
		}
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "HOLDEXISTS") {
			// The script refused the request id itself: not an outage.
			return Decision{BudgetRemaining: -1}, errs, fmt.Errorf("limiter: admit %s/%s %s: %w", req.Team, req.Member, req.RequestID, ErrHoldExists)
		}
		if mayHaveRun(err) {
			r.releaseLate(req.Team, req.Member, req.RequestID)
		}
		d, err := r.degrade(ctx, req, fmt.Errorf("limiter: admit %s/%s: %w", req.Team, req.Member, err))
		return d, errs, err
	}
	r.refusals.put(&req, d, sent)
	return d, errs, nil
}

// admitCall runs ADMIT, carrying ss's SETTLEs or after them in the same pipeline
// when there are any, and returns the settles' errors.
func (r *Redis) admitCall(ctx context.Context, ss []Settlement, req *Request) (Decision, generation, []error, error) {
	a := admitCall{keys: make([]string, 1, 6), spec: make([]byte, 0, 10), nums: make([]byte, 8, 8*16),
		args: make([]any, 8, 20)}
	kb := &a.kb
	kb.sb.Grow(6*(len(r.prefix)+len(req.Team)+16) + 8*len(req.Member) + len(req.KeyID) + len(req.RequestID) + 32)
	base := kb.key(r.prefix, "{t:", req.Team, "}:")
	a.keys[0] = kb.key(base, "h")
	putNum(a.nums[0:], micros(req.Lease))
	ledger := req.ledger()
	a.args[6], a.args[7] = kb.key("k:", req.KeyID), kb.key("c:", req.Member)
	meta := ""
	carried := ledger && carriable(ss, req)
	if ledger {
		a.spec = append(a.spec, '$')
		if carried {
			a.spec = append(a.spec, byte('0'+len(ss)))
		}
		a.num(req.Hold)
		a.num(req.Tokens)
		a.num(req.FitFloor)
		a.args = append(a.args, "e", "x", kb.key("r:", req.RequestID), kb.key("h:", req.Member), "h", "n")
		meta = req.Meta
	}
	a.policy(&req.MemberPolicy, kb.key(base, "m:", req.Member, ":"), req.Member, 0)
	a.policy(&req.TeamPolicy, kb.key(base, "team:"), "", 'a'-'A')
	if req.queues() {
		a.spec = append(a.spec, '~')
		a.num(req.queueStep())
		a.num(micros(req.QueueWait))
		queued := int64(0)
		a.args = append(a.args, "w")
		if req.Queued {
			queued = 1
			a.args = append(a.args, kb.key("t:", req.RequestID))
		}
		a.num(queued)
		a.keys = append(a.keys, kb.key(base, "queue"))
	}
	if ledger {
		a.keys = append(a.keys, kb.key(base, "leases"), kb.key(base, "settled"))
	}
	a.args[0], a.args[1], a.args[2], a.args[3], a.args[4], a.args[5] =
		r.scriptNow(), req.Member, req.RequestID, string(a.spec), a.nums, meta
	if carried {
		return r.admitCarrying(ctx, ss, req.Member, &a, base)
	}
	var errs []error
	var cmd *redis.Cmd
	if len(ss) == 0 {
		cmd = r.run(ctx, admitScript, a.keys, a.args...)
	} else {
		pipe := r.client.Pipeline()
		settles := r.queueSettles(ctx, pipe, ss)
		cmd = admitScript.EvalSha(ctx, pipe, a.keys, a.args...)
		_, _ = pipe.Exec(ctx)
		errs = r.settleResults(ctx, ss, settles)
		if notRun(cmd.Err()) {
			cmd = r.run(ctx, admitScript, a.keys, a.args...)
		}
	}
	v, err := cmd.Result()
	if err != nil {
		return Decision{}, generation{}, errs, err
	}
	d, gen, err := parseAdmit(v)
	return d, gen, errs, err
}

// maxCarriedSettles bounds the settles one ADMIT carries (the spec names the
// count in one digit).
const maxCarriedSettles = 9

// carriable reports whether ADMIT can run ss itself: each is a valid settle of
// req's member, and there are few enough.
func carriable(ss []Settlement, req *Request) bool {
	if len(ss) == 0 || len(ss) > maxCarriedSettles {
		return false
	}
	for i := range ss {
		if ss[i].Team != req.Team || ss[i].Member != req.Member || ss[i].validate() != nil {
			return false
		}
	}
	return true
}

// admitCarrying runs ADMIT with the SETTLEs of ss inside it, ahead of its checks:
// one script call rather than 1 + len(ss), sharing its reads and writes of the
// team's hash. Their replies follow ADMIT's, one double each.
func (r *Redis) admitCarrying(ctx context.Context, ss []Settlement, member string, a *admitCall, base string) (Decision, generation, []error, error) {
	for i := range ss {
		r.fallback.releaseSlots(ss[i].Team, ss[i].Member, ss[i].RequestID)
		a.args = append(a.args, "r:"+ss[i].RequestID)
	}
	a.keys = append(a.keys, base+"m:"+member+":conc", base+"team:conc", base+"counted")
	for i := range ss {
		a.args = append(a.args, append(ss[i].nums(len(ss[i].RequestID)), ss[i].RequestID...))
	}
	errs := make([]error, len(ss))
	fail := func(err error) {
		for i := range errs {
			errs[i] = fmt.Errorf("limiter: settle %s/%s %s: %w", ss[i].Team, ss[i].Member, ss[i].RequestID, err)
		}
	}
	v, err := r.run(ctx, admitScript, a.keys, a.args...).Result()
	if err != nil {
		fail(err)
		return Decision{}, generation{}, errs, err
	}
	v, codes, err := splitSettled(v, len(ss))
	if err != nil {
		fail(err)
		return Decision{}, generation{}, errs, err
	}
	for i, c := range codes {
		if _, err := settleResult(c); err != nil {
			errs[i] = fmt.Errorf("limiter: settle %s/%s %s: %w", ss[i].Team, ss[i].Member, ss[i].RequestID, err)
		}
	}
	d, gen, err := parseAdmit(v)
	return d, gen, errs, err
}

// splitSettled takes the n carried settles' replies off the end of ADMIT's reply.
func splitSettled(reply any, n int) (any, []int64, error) {
	packed, ok := reply.(string)
	v, isArray := reply.([]any)
	if isArray && len(v) > 0 {
		packed, ok = v[0].(string)
	}
	if !ok || len(packed) < 8*n || len(packed)%8 != 0 {
		return nil, nil, fmt.Errorf("unexpected admit reply %q", reply)
	}
	codes := doubles(packed[len(packed)-8*n:])
	packed = packed[:len(packed)-8*n]
	if isArray {
		v[0] = packed
		return v, codes, nil
	}
	return packed, codes, nil
}

// admitCall builds ADMIT's KEYS and ARGV: the keys, the spec and the numbers, and the
// arguments, whose 7th on are the fields of the team hash to read.
type admitCall struct {
	keys       []string
	spec, nums []byte
	args       []any
	kb         keyBuf
}

// keyBuf builds a call's keys as substrings of one string, so that its dozen keys
// cost one allocation rather than a dozen. A strings.Builder never rewrites bytes
// it has written, so each key stays valid (and immutable) as more are added; Grow
// it first, or a key taken before it grows keeps the old buffer alive.
type keyBuf struct{ sb strings.Builder }

func (k *keyBuf) key(parts ...string) string {
	start := k.sb.Len()
	for _, p := range parts {
		k.sb.WriteString(p)
	}
	return k.sb.String()[start:]
}

// num appends v as a little-endian double, which the script unpacks exactly:
// Validate keeps every number below 2^53.
func (a *admitCall) num(v int64) {
	a.nums = binary.LittleEndian.AppendUint64(a.nums, math.Float64bits(float64(v)))
}

func putNum(b []byte, v int64) { binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v))) }

// field is the team hash's field for one scope: "<f>:<member>" for the member,
// "<f>" for the team (member "").
func (a *admitCall) field(f, member string) string {
	if member == "" {
		return f
	}
	return a.kb.key(f, ":", member)
}

// policy adds p's limits; base starts the scope's own keys, member is "" for the
// team; upper is 0 for the member's limits and 'a'-'A' for the team's (upper-case
// spec entries).
func (a *admitCall) policy(p *Policy, base, member string, upper byte) {
	if (p.Rate != nil && p.Rate.Algorithm == AlgorithmTokenBucket) || p.Concurrency > 0 {
		a.args = append(a.args, a.field("s", member))
	}
	if r := p.Rate; r != nil {
		if r.Algorithm == AlgorithmSlidingWindow {
			a.spec = append(a.spec, 'w'-upper)
			a.keys = append(a.keys, a.kb.key(base, "sw"))
			a.num(r.Limit)
			a.num(micros(r.Period))
		} else {
			a.spec = append(a.spec, 'b'-upper)
			a.num(r.Limit)
			a.num(micros(r.Period))
			a.num(r.burst())
		}
	}
	if p.Concurrency > 0 {
		a.spec = append(a.spec, 'c'-upper)
		a.keys = append(a.keys, a.kb.key(base, "conc"))
		a.num(p.Concurrency)
	}
	if p.TokensPerMinute > 0 {
		a.spec = append(a.spec, 't'-upper)
		a.args = append(a.args, a.field("q", member))
		a.num(p.TokensPerMinute)
	}
	if b := p.Budget; b != nil {
		kind := "odm"[b.Period.kind()-1]
		a.spec = append(a.spec, kind-upper)
		a.args = append(a.args, a.field(string(kind), member))
		a.num(b.Limit)
	}
}

// doubles decodes a reply of little-endian doubles.
func doubles(b string) []int64 {
	n := make([]int64, len(b)/8)
	for i := range n {
		n[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[8*i : 8*i+8]))))
	}
	return n
}

// parseAdmit turns ADMIT's reply into a Decision and the generation of the team's
// hash it read (zero when the reply has none: no ledger, or refused before).
func parseAdmit(reply any) (Decision, generation, error) {
	packed, ok := reply.(string)
	var rest []any
	if v, isArray := reply.([]any); isArray && len(v) > 0 {
		packed, ok = v[0].(string)
		rest = v[1:]
	}
	if !ok || len(packed)%8 != 0 {
		return Decision{}, generation{}, fmt.Errorf("unexpected admit reply %q", reply)
	}
	n := doubles(packed)
	if (len(n) != 7 && len(n) < 17) || n[1] < 0 || n[1] >= int64(len(replyReasons)) || n[2] < 0 || n[2] >= int64(len(replyScopes)) {
		return Decision{}, generation{}, fmt.Errorf("unexpected admit reply %v", n)
	}
	d := Decision{
		Allowed:         n[0] == 1,
		Reason:          replyReasons[n[1]],
		Scope:           replyScopes[n[2]],
		Limit:           n[3],
		Remaining:       n[4],
		Reset:           time.Duration(n[5]) * time.Microsecond,
		RetryAfter:      time.Duration(n[6]) * time.Microsecond,
		BudgetRemaining: -1,
	}
	if d.Reason == ReasonQueued {
		d.QueueDepth, d.QueuePosition, d.Limit, d.Remaining = d.Limit, d.Remaining, 0, 0
	}
	if len(n) == 7 {
		return d, generation{}, nil
	}
	if n[9] < 0 || n[9] >= int64(len(replyScopes)) || len(n) != 17+2*int(n[12]) || len(rest) != 2*int(n[12]) {
		return Decision{}, generation{}, fmt.Errorf("unexpected admit reply %v", n)
	}
	d.TooLarge = n[7] == 1
	d.BudgetRemaining, d.BudgetScope, d.Epoch, d.At, d.Fitted = n[8], replyScopes[n[9]], n[11], time.UnixMicro(n[15]).UTC(), n[16]
	if n[10] > 0 {
		d.BudgetResetsAt = time.UnixMicro(n[10]).UTC()
	}
	if n[12] > 0 {
		d.Expired = make([]ExpiredHold, n[12])
		for i := range d.Expired {
			id, ok1 := rest[2*i].(string)
			meta, ok2 := rest[2*i+1].(string)
			if !ok1 || !ok2 {
				return Decision{}, generation{}, fmt.Errorf("unexpected expired hold in admit reply %v", rest[2*i:2*i+2])
			}
			d.Expired[i] = ExpiredHold{RequestID: id, Hold: n[17+2*i], Tokens: n[18+2*i], Meta: meta}
		}
	}
	return d, generation{epoch: n[13], seq: n[14]}, nil
}

// generation is how far a team's hash had come when an ADMIT read it: its epoch
// (later for a later rebuild) and its seq (admissions since the rebuild).
type generation struct{ epoch, seq int64 }

// olderThan reports whether g is older than what was seen before: an earlier
// epoch, or the same epoch with fewer admissions. Every admission whose reply
// came back before this call was sent had run before it, so a hash that only
// moves forward is never older than before.
func (g generation) olderThan(before generation) bool {
	return g.epoch < before.epoch || (g.epoch == before.epoch && g.seq < before.seq)
}

// seenOf is the newest generation of the team's hash this limiter has seen.
func (r *Redis) seenOf(team string) generation {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	return r.seen[team]
}

// noteSeen records g, and the admission it counted if it admitted.
func (r *Redis) noteSeen(team string, g generation, admitted bool) {
	if admitted {
		g.seq++
	}
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if cur := r.seen[team]; cur.olderThan(g) {
		r.seen[team] = g
	}
}

// NoteWatermark records that the team's counters had reached epoch and seq
// (Decision.TeamEpoch and Seq) when some replica read them: the durable
// watermark kept with the ledger. An admission that reads older counters has
// them rebuilt, as if this replica had read the newer ones itself.
func (r *Redis) NoteWatermark(team string, epoch, seq int64) {
	if epoch > 0 {
		r.noteSeen(team, generation{epoch: epoch, seq: seq}, false)
	}
}

// forgetGeneration drops the team's epoch if it is still stale, so that the next
// admission has the counters rebuilt; another replica may have rebuilt them first.
func (r *Redis) forgetGeneration(ctx context.Context, team string, stale int64) error {
	nums := make([]byte, 8)
	putNum(nums, stale)
	return r.run(ctx, forgetScript, []string{r.teamBase(team) + "h"}, nums).Err()
}

// forgetScript drops a team's epoch (ARGV 1, packed) if the hash still has it.
var forgetScript = redis.NewScript(`if redis.call('HGET', KEYS[1], 'e') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'e')
end
return 0`)

func (r *Redis) teamBase(team string) string { return r.prefix + "{t:" + team + "}:" }

// degrade decides req without Redis after cause.
func (r *Redis) degrade(ctx context.Context, req Request, cause error) (Decision, error) {
	// A caller that gave up is not an outage: nothing to decide. Spend and tokens
	// cannot be checked without the shared counters: fail closed.
	// The waiting room lives in Redis: without it, nobody queues.
	req.QueueWait, req.Queued = 0, false
	if !req.FailOpen || ctx.Err() != nil || req.ledger() {
		r.failClosed.Add(1)
		return Decision{Reason: ReasonUnavailable, RetryAfter: unavailableRetry, BudgetRemaining: -1}, cause
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

// mayHaveRun reports whether a failed call may still have run in Redis: it
// timed out or its connection broke after the command was written (a command
// sent is not recalled by closing its connection). Only a call that provably
// never left (no connection from the pool, a refused dial) or that Redis
// refused before running it did not.
func mayHaveRun(err error) bool {
	var opErr *net.OpError
	return !errors.Is(err, redis.ErrPoolTimeout) && !(errors.As(err, &opErr) && opErr.Op == "dial") && !notRun(err)
}

// notRun reports whether err is Redis's refusal of a command it did not run: a
// Cluster redirection, a node that is loading or down, or a write refused on a
// replica before the script wrote anything.
func notRun(err error) bool {
	// Read as redis.HasErrorPrefix does, once rather than once a prefix: it
	// allocates on every call, even for no error. rErr escapes, so it is
	// declared only once there is an error to read.
	if err == nil {
		return false
	}
	var rErr redis.Error
	if !errors.As(err, &rErr) {
		return false
	}
	msg := strings.TrimPrefix(rErr.Error(), "ERR ")
	for _, prefix := range [...]string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY", "NOSCRIPT"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// maxNotRunRetries is how many times a call that Redis refused without running
// it is sent again (a Cluster slot that moved: the client reloads its slot map).
// go-redis's own retries are off (the app's client has MaxRetries and
// MaxRedirects -1): they resend a command whose connection broke after the
// write, which may already have run.
const maxNotRunRetries = 2

// run runs script once, and again only when Redis refused it without running it.
func (r *Redis) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	for attempt := 0; ; attempt++ {
		cmd := script.Run(ctx, r.client, keys, args...)
		if attempt == maxNotRunRetries || !notRun(cmd.Err()) || ctx.Err() != nil {
			return cmd
		}
	}
}

// lateReleaseAfter are the delays after which releaseLate settles an admission
// the caller gave up on: at once, then in case Redis ran it after that.
var lateReleaseAfter = [...]time.Duration{0, time.Second, 10 * time.Second}

// maxLateReleases bounds the releases waiting at once; past it (Redis stalled for
// long under heavy traffic) a late admission's hold and slots end with its lease.
const maxLateReleases = 256

// releaseLate settles for nothing, in the background, an admission whose caller
// timed out: Redis may still have run it (a command sent is not recalled by
// closing its connection), which would leave a hold charged in full at the end
// of its lease, and a concurrency slot taken until then, for a request answered
// "unavailable". A settle of a request id never admitted changes nothing, so it
// is tried at once and again later, in case the admission ran after the first
// try.
func (r *Redis) releaseLate(team, member, requestID string) {
	if r.lateReleases.Add(1) > maxLateReleases {
		r.lateReleases.Add(-1)
		return
	}
	go func() {
		defer r.lateReleases.Add(-1)
		for _, after := range lateReleaseAfter {
			time.Sleep(after)
			ctx, cancel := context.WithTimeout(context.Background(), max(r.timeout, time.Second))
			_, _ = r.Settle(ctx, Settlement{Team: team, Member: member, RequestID: requestID})
			cancel()
		}
	}()
}

// Settle replaces the request's hold with its real cost and frees its concurrency
// slots with one script call. A replay, or a request id never admitted with a hold,
// changes nothing and says so.
//
// When the hold is unknown because Redis lost it: if the team has been rebuilt since
// s.Epoch (the generation the hold was placed in), Cost is charged to the current
// periods' counters that exist (Lost); if it has not been rebuilt yet, nothing
// changes, and the request is counted only if its ledger row is durable before the
// rebuild reads the ledger. Either way such a request was in flight at the loss: this
// is the overspend bound the package documents. Both cases remember the request id,
// so a replay within SettledWindow is not charged; a replay of a settle made before
// the loss, arriving after the rebuild, finds no trace and is charged again (an
// over-count, never an under-count).
func (r *Redis) Settle(ctx context.Context, s Settlement) (SettleResult, error) {
	if err := s.validate(); err != nil {
		return SettleResult{}, fmt.Errorf("limiter: settle: %w", err)
	}
	// The slot may have come from the twin while Redis was unreachable.
	r.fallback.releaseSlots(s.Team, s.Member, s.RequestID)
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := r.settle(ctx, s)
	if err != nil {
		return SettleResult{}, fmt.Errorf("limiter: settle %s/%s %s: %w", s.Team, s.Member, s.RequestID, err)
	}
	return res, nil
}

// settle runs SETTLE on ctx.
func (r *Redis) settle(ctx context.Context, s Settlement) (SettleResult, error) {
	keys, args := r.settleCall(s)
	return parseSettle(r.run(ctx, settleScript, keys, args...))
}

// settleCall builds SETTLE's KEYS and ARGV for s.
func (r *Redis) settleCall(s Settlement) (keys []string, args []any) {
	var kb keyBuf
	kb.sb.Grow(6*(len(r.prefix)+len(s.Team)+16) + len(s.Member))
	base := kb.key(r.prefix, "{t:", s.Team, "}:")
	keys = []string{kb.key(base, "h"), kb.key(base, "leases"), kb.key(base, "settled"),
		kb.key(base, "m:", s.Member, ":conc"), kb.key(base, "team:conc"), kb.key(base, "counted")}
	return keys, []any{r.scriptNow(), s.RequestID, s.Member, s.nums(0)}
}

// nums is s's cost, tokens and epoch as SETTLE takes them, three little-endian
// doubles, with room for extra more bytes.
func (s *Settlement) nums(extra int) []byte {
	b := make([]byte, 24, 24+extra)
	putNum(b[0:], s.Cost)
	putNum(b[8:], s.Tokens)
	putNum(b[16:], s.Epoch)
	return b
}

func parseSettle(cmd *redis.Cmd) (SettleResult, error) {
	v, err := cmd.Int64()
	if err != nil {
		return SettleResult{}, err
	}
	return settleResult(v)
}

// settleResult reads SETTLE's reply: applied + 2 × known + 4 × lost.
func settleResult(v int64) (SettleResult, error) {
	if v < 0 || v > 7 {
		return SettleResult{}, fmt.Errorf("unexpected reply %v", v)
	}
	return SettleResult{Applied: v&1 != 0, Known: v&2 != 0, Lost: v&4 != 0}, nil
}

// SettleAll settles every s in one round trip (a pipeline of SETTLEs; Redis
// runs each script atomically) and returns each one's error, nil when it was
// applied or was a replay. A SETTLE is idempotent per request id, so a failed
// one may be sent again.
func (r *Redis) SettleAll(ctx context.Context, ss []Settlement) []error {
	if len(ss) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	pipe := r.client.Pipeline()
	cmds := r.queueSettles(ctx, pipe, ss)
	_, _ = pipe.Exec(ctx)
	return r.settleResults(ctx, ss, cmds)
}

// queueSettles adds the SETTLE of each valid s to pipe; an invalid one gets no
// command (nil).
func (r *Redis) queueSettles(ctx context.Context, pipe redis.Pipeliner, ss []Settlement) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(ss))
	for i := range ss {
		if ss[i].validate() != nil {
			continue
		}
		r.fallback.releaseSlots(ss[i].Team, ss[i].Member, ss[i].RequestID)
		keys, args := r.settleCall(ss[i])
		cmds[i] = settleScript.EvalSha(ctx, pipe, keys, args...)
	}
	return cmds
}

// settleResults reads the replies of queueSettles's commands once their
// pipeline ran, sending again on its own any SETTLE that Redis did not run.
func (r *Redis) settleResults(ctx context.Context, ss []Settlement, cmds []*redis.Cmd) []error {
	errs := make([]error, len(ss))
	for i, cmd := range cmds {
		if cmd == nil {
			errs[i] = fmt.Errorf("limiter: settle: %w", ss[i].validate())
			continue
		}
		if notRun(cmd.Err()) {
			// Not run: the script is not cached (a restarted Redis) or the slot
			// moved; Run loads it and follows the redirection.
			keys, args := r.settleCall(ss[i])
			cmd = r.run(ctx, settleScript, keys, args...)
		}
		if _, err := parseSettle(cmd); err != nil {
			errs[i] = fmt.Errorf("limiter: settle %s/%s %s: %w", ss[i].Team, ss[i].Member, ss[i].RequestID, err)
		}
	}
	return errs
}

// Rebuild restores the team's spend counters (and mirrored revocations and cut-offs)
// from state with one script call, unless the team's marker is already set: then
// another replica rebuilt it first and nothing changes (nil error). It fails with
// ErrRebuildEarly when state.At lies in a later period than the script's clock.
func (r *Redis) Rebuild(ctx context.Context, team string, state TeamState) error {
	if err := state.validate(); err != nil {
		return fmt.Errorf("limiter: rebuild %s: %w", team, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.teamBase(team)
	keys := []string{base + "h", base + "leases", base + "counted"}
	args := []any{r.scriptNow(), rand.Int64N(2048), state.At.UnixMicro(), r.seenOf(team).epoch, state.Generation, len(state.Counted)}
	for _, id := range state.Counted {
		args = append(args, id)
	}
	args = append(args, len(state.RevokedKeys)+len(state.CutOff))
	for _, k := range state.RevokedKeys {
		args = append(args, "k:"+k)
	}
	for _, m := range state.CutOff {
		args = append(args, "c:"+m)
	}
	triples := len(state.Team)
	for _, ps := range state.Members {
		triples += len(ps)
	}
	args = append(args, triples)
	for p, v := range state.Team {
		args = append(args, "odm"[p.kind()-1:p.kind()], p.kind(), v)
	}
	for m, ps := range state.Members {
		for p, v := range ps {
			args = append(args, "odm"[p.kind()-1:p.kind()]+":"+m, p.kind(), v)
		}
	}
	for _, h := range state.Holds {
		nums := make([]byte, 32)
		putNum(nums[0:], h.Hold)
		putNum(nums[8:], h.Expires.UnixMicro())
		putNum(nums[16:], budgetKind(h.MemberBudget))
		putNum(nums[24:], budgetKind(h.TeamBudget))
		args = append(args, h.RequestID, h.Member, nums, h.Meta)
	}
	n, err := r.run(ctx, rebuildScript, keys, args...).Int64()
	if err != nil {
		return fmt.Errorf("limiter: rebuild %s: %w", team, err)
	}
	if n < 0 {
		return ErrRebuildEarly
	}
	r.refusals.forgetTeam(team)
	return nil
}

// LateRow is a ledger row that reached the ledger after the rebuild generation
// it was written in had begun (store.LedgerFlush.Final).
type LateRow struct {
	RequestID, Member string
	Cost              int64 // micro-dollars
	Epoch             int64 // Decision.TeamEpoch of its admission
}

// ErrNoCounters is ChargeLate's answer while the team has no counters: the next
// rebuild may have read the ledger before the rows; charge them again after it.
var ErrNoCounters = errors.New("limiter: the team has no counters to charge yet")

// ChargeLate charges rows to the team's counters if those were rebuilt from a
// read of the ledger that did not have them: the generation the rows landed in
// (gen) is the one the counters were rebuilt from, or a later one. Each row is
// charged once per generation of the counters, and not at all if it was
// admitted in the current one or the counters count it already, so a retry
// never charges twice. It returns how many rows it charged.
func (r *Redis) ChargeLate(ctx context.Context, team string, gen int64, rows []LateRow) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.teamBase(team)
	args := make([]any, 0, 2+4*len(rows))
	args = append(args, r.scriptNow(), gen)
	for _, row := range rows {
		args = append(args, row.RequestID, row.Member, row.Cost, row.Epoch)
	}
	n, err := r.run(ctx, lateScript, []string{base + "h", base + "counted"}, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("limiter: late charge %s: %w", team, err)
	}
	if n < 0 {
		return 0, ErrNoCounters
	}
	return int(n), nil
}

// RebuiltAfter reports whether the team's counters come from a rebuild that
// read the ledger after generation gen began, so they count every row that
// landed in gen. If they come from an earlier one, it drops their epoch, so
// that the next admission rebuilds them, and reports false: ask again, since
// a rebuild under way may still write counters from an earlier read. Without
// counters it reports false too.
func (r *Redis) RebuiltAfter(ctx context.Context, team string, gen int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	n, err := r.run(ctx, rebuiltAfterScript, []string{r.teamBase(team) + "h"}, gen).Int64()
	if err != nil {
		return false, fmt.Errorf("limiter: rebuilt after %s: %w", team, err)
	}
	return n == 1, nil
}

// rebuiltAfterScript: 1 if the hash's rebuild generation (g, packed) is later
// than ARGV 1; else it drops the epoch and answers 0.
var rebuiltAfterScript = redis.NewScript(`local v = redis.call('HMGET', KEYS[1], 'e', 'g')
if not v[1] then
  return 0
end
if v[2] and struct.unpack('<d', v[2]) > tonumber(ARGV[1]) then
  return 1
end
redis.call('HDEL', KEYS[1], 'e')
return 0`)

// SetKeyRevoked records in Redis that the team's key is revoked (or not), which every
// replica's next Admit checks.
func (r *Redis) SetKeyRevoked(ctx context.Context, team, keyID string, revoked bool) error {
	// The twin learns it too, for the fail-open decisions it takes while Redis is down.
	_ = r.fallback.SetKeyRevoked(ctx, team, keyID, revoked)
	r.refusals.forgetTeam(team)
	if err := r.setFlag(ctx, team, "k:"+keyID, revoked); err != nil {
		return fmt.Errorf("limiter: revoke key %s/%s: %w", team, keyID, err)
	}
	return nil
}

// SetMemberCutOff records in Redis that the team's member is cut off (or restored),
// which every replica's next Admit checks.
func (r *Redis) SetMemberCutOff(ctx context.Context, team, member string, cutOff bool) error {
	_ = r.fallback.SetMemberCutOff(ctx, team, member, cutOff)
	r.refusals.forgetTeam(team)
	if err := r.setFlag(ctx, team, "c:"+member, cutOff); err != nil {
		return fmt.Errorf("limiter: cut off member %s/%s: %w", team, member, err)
	}
	return nil
}

// Leave takes the request's ticket out of the team's waiting room.
func (r *Redis) Leave(ctx context.Context, team, requestID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	base := r.teamBase(team)
	if err := r.run(ctx, leaveScript, []string{base + "h", base + "queue"}, requestID).Err(); err != nil {
		return fmt.Errorf("limiter: leave %s %s: %w", team, requestID, err)
	}
	return nil
}

func (r *Redis) setFlag(ctx context.Context, team, field string, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	h := r.teamBase(team) + "h"
	if on {
		return r.client.HSet(ctx, h, field, "1").Err()
	}
	return r.client.HDel(ctx, h, field).Err()
}
