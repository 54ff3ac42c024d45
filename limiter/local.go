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
// admit.lua, step for step, on state held in memory. It serves a single replica without
// Redis, decides fail-open requests while Redis is unreachable, and is the reference
// model the Redis implementation is tested against. It keeps state for every member it
// has seen; a team's members are few.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[stateKey]bucketState
	windows map[stateKey][]windowEntry // sorted by (at, id), like a ZSET
	slots   map[stateKey]map[string]int64
	revoked map[string]map[string]bool // team → key id
	cutOff  map[string]map[string]bool // team → member
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
		revoked: map[string]map[string]bool{},
		cutOff:  map[string]map[string]bool{},
	}
}

var _ Limiter = (*Local)(nil)

// check is the outcome of one limit, computed without writing; commit reserves.
type check struct {
	ok               bool
	reason           Reason
	scope            Scope
	limit, remaining int64
	resetUS, retryUS int64
	commit           func()
}

// Admit decides req; it fails only on an invalid request.
func (l *Local) Admit(_ context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, fmt.Errorf("limiter: admit: %w", err)
	}
	now := l.now().UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.revoked[req.Team][req.KeyID] {
		return Decision{Reason: ReasonRevoked, Scope: ScopeMember}, nil
	}
	if l.cutOff[req.Team][req.Member] {
		return Decision{Reason: ReasonCutOff, Scope: ScopeMember}, nil
	}
	checks := make([]check, 0, 4)
	checks = l.policy(checks, now, ScopeMember, stateKey{req.Team, req.Member}, req.MemberPolicy, &req)
	checks = l.policy(checks, now, ScopeTeam, stateKey{team: req.Team}, req.TeamPolicy, &req)
	return decide(checks), nil
}

func (l *Local) policy(checks []check, now int64, scope Scope, key stateKey, p Policy, req *Request) []check {
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
	return checks
}

// decide is admit.lua's verdict: a refusing rate limit wins over a refusing concurrency
// cap, then the longest wait; when all pass, every check commits and the decision
// reports the rate limit with the fewest requests left.
func decide(checks []check) Decision {
	var worst, tightest *check
	for i := range checks {
		c := &checks[i]
		switch {
		case !c.ok:
			if worst == nil || (c.reason == ReasonRate && worst.reason == ReasonConcurrency) ||
				(c.reason == worst.reason && c.retryUS > worst.retryUS) {
				worst = c
			}
		case c.reason == ReasonRate:
			if tightest == nil || c.remaining < tightest.remaining {
				tightest = c
			}
		}
	}
	if worst != nil {
		return Decision{Reason: worst.reason, Scope: worst.scope, Limit: worst.limit, Remaining: worst.remaining,
			Reset: time.Duration(worst.resetUS) * time.Microsecond, RetryAfter: time.Duration(worst.retryUS) * time.Microsecond}
	}
	for _, c := range checks {
		c.commit()
	}
	if tightest == nil {
		return Decision{Allowed: true}
	}
	return Decision{Allowed: true, Scope: tightest.scope, Limit: tightest.limit, Remaining: tightest.remaining,
		Reset: time.Duration(tightest.resetUS) * time.Microsecond}
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
	c := check{reason: ReasonRate, scope: scope, limit: limit}
	if tokens < period {
		c.resetUS = ceilDiv(capacity-tokens, limit)
		c.retryUS = ceilDiv(period-tokens, limit)
		return c
	}
	left := tokens - period
	c.ok = true
	c.remaining = left / period
	c.resetUS = ceilDiv(capacity-left, limit)
	c.commit = func() { l.buckets[key] = bucketState{tokens: left, ts: ts, period: period} }
	return c
}

func (l *Local) window(key stateKey, scope Scope, r *Rate, now int64, rid string) check {
	limit, period := r.Limit, micros(r.Period)
	entries := l.windows[key]
	live := entries[sortSearch(entries, now-period):]
	count := int64(len(live))
	c := check{reason: ReasonRate, scope: scope, limit: limit}
	newest := now
	if count > 0 {
		newest = live[count-1].at
	}
	if count >= limit {
		c.retryUS = live[count-limit].at + period - now
		c.resetUS = newest + period - now
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
	c := check{reason: ReasonConcurrency, scope: scope, limit: capacity}
	if active >= capacity {
		c.retryUS = min(earliest-now, micros(concurrencyRetryCap))
		c.resetUS = c.retryUS
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

// Release frees the request's concurrency slots; releasing twice is harmless.
func (l *Local) Release(_ context.Context, team, member, requestID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.slots[stateKey{team, member}], requestID)
	delete(l.slots[stateKey{team: team}], requestID)
	return nil
}

// SetKeyRevoked marks the team's key revoked, or not.
func (l *Local) SetKeyRevoked(_ context.Context, team, keyID string, revoked bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	setFlag(l.revoked, team, keyID, revoked)
	return nil
}

// SetMemberCutOff marks the team's member cut off, or restores them.
func (l *Local) SetMemberCutOff(_ context.Context, team, member string, cutOff bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	setFlag(l.cutOff, team, member, cutOff)
	return nil
}

func setFlag(sets map[string]map[string]bool, team, name string, on bool) {
	if !on {
		delete(sets[team], name)
		return
	}
	if sets[team] == nil {
		sets[team] = map[string]bool{}
	}
	sets[team][name] = true
}

// ceilDiv is ⌈a/b⌉ for a >= 0, b >= 1.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
