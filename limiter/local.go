package limiter

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Local is the in-process twin of Redis: the same checks, verdict and integer math as
// the scripts, step for step, on state held in memory. It serves a single replica
// without Redis, decides fail-open requests while Redis is unreachable, and is the
// reference model the Redis implementation is tested against. It keeps state for every
// member it has seen; a team's members are few.
//
// Local never loses its state, so it never refuses with ReasonRebuild (tests can make
// it forget a team, to model a Redis flush).
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[stateKey]bucketState
	windows map[stateKey][]windowEntry // sorted by (at, id), like a ZSET
	slots   map[stateKey]map[string]int64
	tpms    map[stateKey]tpmState
	teams   map[string]*localTeam
}

// stateKey names one member's state, or the team's own when member is "".
type stateKey struct{ team, member string }

type bucketState struct{ tokens, ts, period int64 }

type windowEntry struct {
	at int64
	id string
}

// NewLocal returns an empty Local reading the time from now (time.Now if nil).
func NewLocal(now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{
		now:     now,
		buckets: map[stateKey]bucketState{},
		windows: map[stateKey][]windowEntry{},
		slots:   map[stateKey]map[string]int64{},
		tpms:    map[stateKey]tpmState{},
		teams:   map[string]*localTeam{},
	}
}

var _ Limiter = (*Local)(nil)

// check is the outcome of one limit, computed without writing; commit reserves.
type check struct {
	ok               bool
	rank             int   // 1 budget, 2 rate and TPM, 3 concurrency: the lowest refusal wins
	wait             int64 // among equal ranks the longest wait wins; too large is forever
	reason           Reason
	scope            Scope
	limit, remaining int64
	resetUS, retryUS int64
	tooLarge         bool
	budgetLeft       int64 // budget refusals: what is left before the hold, at least 0
	budgetNext       int64 // budget refusals: when the period ends, µs; 0 for total
	// reserve is, for a team bucket that passes but would be left below its reserve,
	// the refusal a backlogged member gets instead (see the waiting room).
	reserve *check
	// turn is set on the team's request-rate bucket, for the waiting room.
	turn   *turn
	commit func()
}

// turn is the team's request-rate bucket as the waiting room sees it: its tokens
// before this request, a request's cost, its refill a microsecond and when it is full.
type turn struct{ tokens, cost, rate, resetUS int64 }

// behind is the refusal of a request whose turn comes after ahead tickets, each
// served with a token of the bucket, if even that is later than maxWait.
func (t *turn) behind(ahead, maxWait int64) *check {
	soonest := ceilDiv((ahead+1)*t.cost-t.tokens, t.rate)
	if soonest <= maxWait {
		return nil
	}
	return &check{rank: 2, wait: soonest, reason: ReasonRate, scope: ScopeTeam, limit: t.rate, resetUS: t.resetUS,
		retryUS: soonest}
}

// holdReserve sets c.reserve for a team bucket of capacity units, refilled rate units
// a microsecond, that passes with left units after this request's cost.
func (c *check) holdReserve(rate, capacity, cost, left, resetUS int64) {
	if c.scope != ScopeTeam {
		return
	}
	// queueReserve's refill, at most half of what is left once the cost is given,
	// so that a backlogged member always fits.
	r := (capacity - cost) / 2
	if rate <= r/micros(queueReserve) {
		r = rate * micros(queueReserve)
	}
	if left < r {
		wait := ceilDiv(r-left, rate)
		c.reserve = &check{rank: 2, wait: wait, reason: c.reason, scope: ScopeTeam, limit: c.limit, resetUS: resetUS,
			retryUS: wait}
	}
}

const forever = maxExact

// Admit decides req; it fails only on an invalid request, or one whose id still holds
// a reservation (ErrHoldExists).
func (l *Local) Admit(_ context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, fmt.Errorf("limiter: admit: %w", err)
	}
	now := l.now().UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.team(req.Team)
	if t.revoked[req.KeyID] {
		return Decision{Reason: ReasonRevoked, Scope: ScopeMember, BudgetRemaining: -1}, nil
	}
	if t.cutOff[req.Member] {
		return Decision{Reason: ReasonCutOff, Scope: ScopeMember, BudgetRemaining: -1}, nil
	}
	var a *admission
	if req.ledger() {
		if t.epoch == 0 {
			return Decision{Reason: ReasonRebuild, BudgetRemaining: -1}, nil
		}
		if _, ok := t.holds[req.RequestID]; ok {
			return Decision{BudgetRemaining: -1}, fmt.Errorf("limiter: admit %s/%s %s: %w", req.Team, req.Member, req.RequestID, ErrHoldExists)
		}
		a = &admission{team: t, req: &req, now: now, spend: map[int64]*spendRead{}}
		a.expired = t.sweep(now)
		a.heldMember, a.heldTeam = t.held[req.Member], t.held[""]
	}
	checks := make([]check, 0, 8)
	checks = l.policy(checks, a, now, ScopeMember, stateKey{req.Team, req.Member}, &req.MemberPolicy, &req)
	checks = l.policy(checks, a, now, ScopeTeam, stateKey{team: req.Team}, &req.TeamPolicy, &req)
	if a != nil {
		a.fit()
	}
	if d := l.queue(t, &req, now, checks, a); d != nil {
		return *d, nil
	}
	return decide(checks, a), nil
}

func (l *Local) policy(checks []check, a *admission, now int64, scope Scope, key stateKey, p *Policy, req *Request) []check {
	if r := p.Rate; r != nil {
		if r.Algorithm == AlgorithmTokenBucket {
			checks = append(checks, l.bucket(key, scope, r, now))
		} else {
			checks = append(checks, l.window(key, scope, r, now, req.RequestID))
		}
	}
	if p.Concurrency > 0 {
		checks = append(checks, l.slot(key, scope, p.Concurrency, now, micros(req.Lease), req.RequestID))
	}
	if p.TokensPerMinute > 0 {
		checks = append(checks, l.tpm(key, scope, p.TokensPerMinute, req.Tokens, now, a))
	}
	if p.Budget != nil {
		checks = append(checks, a.budget(scope, p.Budget))
	}
	return checks
}

// decide is admit.lua's verdict: the refusal of lowest rank, then the longest wait,
// then the first; when all pass, every check commits and the decision reports the rate
// limit with the fewest requests left.
func decide(checks []check, a *admission) Decision {
	var worst, tightest *check
	for i := range checks {
		c := &checks[i]
		switch {
		case !c.ok:
			if worst == nil || c.rank < worst.rank || (c.rank == worst.rank && c.wait > worst.wait) {
				worst = c
			}
		case c.reason == ReasonRate:
			if tightest == nil || c.remaining < tightest.remaining {
				tightest = c
			}
		}
	}
	if worst != nil {
		d := Decision{Reason: worst.reason, Scope: worst.scope, Limit: worst.limit, Remaining: worst.remaining,
			Reset: time.Duration(worst.resetUS) * time.Microsecond, RetryAfter: time.Duration(worst.retryUS) * time.Microsecond,
			BudgetRemaining: -1}
		if a != nil {
			d.At = time.UnixMicro(a.now).UTC()
			a.refused(&d, worst)
		}
		return d
	}
	for _, c := range checks {
		if c.commit != nil {
			c.commit()
		}
	}
	d := Decision{Allowed: true, BudgetRemaining: -1}
	if tightest != nil {
		d.Scope, d.Limit, d.Remaining = tightest.scope, tightest.limit, tightest.remaining
		d.Reset = time.Duration(tightest.resetUS) * time.Microsecond
	}
	if a != nil {
		d.At = time.UnixMicro(a.now).UTC()
		a.admitted(&d)
	}
	return d
}

func (l *Local) bucket(key stateKey, scope Scope, r *Rate, now int64) check {
	limit, period, burst := r.Limit, micros(r.Period), r.burst()
	capacity := burst * period
	tokens, ts := capacity, now
	if s, ok := l.buckets[key]; ok {
		tokens, ts = s.tokens, s.ts
		if s.period != period {
			tokens = min(tokens/s.period, burst) * period
		}
		tokens = min(tokens, capacity)
	}
	if now > ts {
		if now-ts >= ceilDiv(capacity-tokens, limit) {
			tokens = capacity
		} else {
			tokens += (now - ts) * limit
		}
		ts = now
	}
	c := check{rank: 2, reason: ReasonRate, scope: scope, limit: limit}
	full := ceilDiv(capacity-tokens, limit) // until the bucket is full, before this request
	if scope == ScopeTeam {
		c.turn = &turn{tokens: tokens, cost: period, rate: limit, resetUS: full}
	}
	if tokens < period {
		c.resetUS = full
		c.retryUS = ceilDiv(period-tokens, limit)
		c.wait = c.retryUS
		return c
	}
	left := tokens - period
	c.ok = true
	c.remaining = left / period
	c.resetUS = ceilDiv(capacity-left, limit)
	c.holdReserve(limit, capacity, period, left, full)
	c.commit = func() { l.buckets[key] = bucketState{tokens: left, ts: ts, period: period} }
	return c
}

func (l *Local) window(key stateKey, scope Scope, r *Rate, now int64, rid string) check {
	limit, period := r.Limit, micros(r.Period)
	entries := l.windows[key]
	live := entries[sortSearch(entries, now-period):]
	count := int64(len(live))
	c := check{rank: 2, reason: ReasonRate, scope: scope, limit: limit}
	newest := now
	if count > 0 {
		newest = live[count-1].at
	}
	if count >= limit {
		c.retryUS = live[count-limit].at + period - now
		c.resetUS = newest + period - now
		c.wait = c.retryUS
		return c
	}
	c.ok = true
	c.remaining = limit - count - 1
	c.resetUS = max(newest, now) + period - now
	c.commit = func() {
		// Like ZADD: a request id already present moves to the new time.
		kept := slices.DeleteFunc(slices.Clone(live), func(e windowEntry) bool { return e.id == rid })
		e := windowEntry{at: now, id: rid}
		i, _ := slices.BinarySearchFunc(kept, e, compareEntries)
		l.windows[key] = slices.Insert(kept, i, e)
	}
	return c
}

// sortSearch is the index of the first entry with at > from.
func sortSearch(entries []windowEntry, from int64) int {
	i, _ := slices.BinarySearchFunc(entries, from, func(e windowEntry, from int64) int {
		if e.at <= from {
			return -1
		}
		return 1
	})
	return i
}

func compareEntries(a, b windowEntry) int {
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.id, b.id))
}

func (l *Local) slot(key stateKey, scope Scope, capacity, now, lease int64, rid string) check {
	held := l.slots[key]
	var active int64
	earliest := int64(math.MaxInt64)
	for _, expiry := range held {
		if expiry > now {
			active++
			earliest = min(earliest, expiry)
		}
	}
	c := check{rank: 3, reason: ReasonConcurrency, scope: scope, limit: capacity}
	if active >= capacity {
		c.retryUS = min(earliest-now, micros(concurrencyRetryCap))
		c.resetUS = c.retryUS
		c.wait = c.retryUS
		return c
	}
	c.ok = true
	c.remaining = capacity - active - 1
	c.commit = func() {
		if held == nil {
			held = map[string]int64{}
			l.slots[key] = held
		}
		for id, expiry := range held {
			if expiry <= now {
				delete(held, id)
			}
		}
		held[rid] = now + lease
	}
	return c
}

// SetKeyRevoked marks the team's key revoked, or not.
func (l *Local) SetKeyRevoked(_ context.Context, team, keyID string, revoked bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	setFlag(l.team(team).revoked, keyID, revoked)
	return nil
}

// SetMemberCutOff marks the team's member cut off, or restores them.
func (l *Local) SetMemberCutOff(_ context.Context, team, member string, cutOff bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	setFlag(l.team(team).cutOff, member, cutOff)
	return nil
}

func setFlag(set map[string]bool, name string, on bool) {
	if on {
		set[name] = true
	} else {
		delete(set, name)
	}
}

// ceilDiv is ⌈a/b⌉ for a >= 0, b >= 1.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
