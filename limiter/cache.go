package limiter

import (
	"sync"
	"time"
)

// refusalCache remembers rate refusals so that a member hammering past a limit is
// refused in memory until its RetryAfter, sparing Redis and the team's hot shard.
//
// It never changes whether a request is admitted. A rate refusal at t with RetryAfter r
// means the limit has too little left until t+r even if nothing else spends it, and a
// refused request spends nothing, so every replica's script refuses until then too.
// The deadline counts from before the call was sent, so it is never later than the
// script's own. Entries are keyed by member, key and Rate, so a changed policy asks
// Redis, and a revocation or cut-off made through this replica drops the team's
// entries. What can still differ is the detail: a member limit's cached RetryAfter can
// be shorter than the script's if the team limit got tighter meanwhile, and a key
// revoked through another replica reads as a rate refusal until the deadline.
// Concurrency refusals are never cached: slots come back whenever a response completes.
// A cached refusal carries no budget figures (BudgetRemaining -1) and sweeps no
// expired holds; the next call that reaches Redis does.
type refusalCache struct {
	mu      sync.Mutex
	entries map[refusalKey]refusal
}

// refusalKey names one rate limit as seen by one member's key.
type refusalKey struct {
	team, member, keyID string
	scope               Scope
	rate                Rate
}

type refusal struct {
	scope            Scope
	limit            int64
	retryAt, resetAt time.Time
}

// maxRefusals bounds the cache; past it, expired entries are dropped and, if it is
// still full, new refusals are simply not cached.
const maxRefusals = 10_000

func (c *refusalCache) get(req *Request, now time.Time) (Decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best refusal
	found := false
	keys, n := cacheKeys(req)
	for _, k := range keys[:n] {
		f, ok := c.entries[k]
		if !ok {
			continue
		}
		if !now.Before(f.retryAt) {
			delete(c.entries, k)
			continue
		}
		// As in the script: among rate refusals the longest wait wins, member first on ties.
		if !found || f.retryAt.After(best.retryAt) {
			best, found = f, true
		}
	}
	if !found {
		return Decision{}, false
	}
	return Decision{Reason: ReasonRate, Scope: best.scope, Limit: best.limit,
		Reset: best.resetAt.Sub(now), RetryAfter: best.retryAt.Sub(now), BudgetRemaining: -1}, true
}

// put caches d if it is a rate refusal; sent is the local time the call was sent.
func (c *refusalCache) put(req *Request, d Decision, sent time.Time) {
	if d.Allowed || d.Reason != ReasonRate || d.RetryAfter <= 0 {
		return
	}
	if d.Scope == ScopeTeam && req.queues() {
		// Such a refusal waited no longer than this request could: a later one
		// might be let wait instead.
		return
	}
	k := refusalKey{team: req.Team, member: req.Member, keyID: req.KeyID, scope: d.Scope}
	p := req.TeamPolicy
	if d.Scope == ScopeMember {
		p = req.MemberPolicy
	}
	k.rate = *p.Rate
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[refusalKey]refusal{}
	}
	if len(c.entries) >= maxRefusals {
		for k, f := range c.entries {
			if !sent.Before(f.retryAt) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxRefusals {
			return
		}
	}
	c.entries[k] = refusal{scope: d.Scope, limit: d.Limit, retryAt: sent.Add(d.RetryAfter), resetAt: sent.Add(d.Reset)}
}

// forgetTeam drops the team's entries, so that a revocation or cut-off made through
// this replica shows its own reason at the next request.
func (c *refusalCache) forgetTeam(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.team == team {
			delete(c.entries, k)
		}
	}
}

// cacheKeys names the request's rate limits, member first.
func cacheKeys(req *Request) (keys [2]refusalKey, n int) {
	if r := req.MemberPolicy.Rate; r != nil {
		keys[n] = refusalKey{team: req.Team, member: req.Member, keyID: req.KeyID, scope: ScopeMember, rate: *r}
		n++
	}
	if r := req.TeamPolicy.Rate; r != nil && !req.queues() {
		keys[n] = refusalKey{team: req.Team, member: req.Member, keyID: req.KeyID, scope: ScopeTeam, rate: *r}
		n++
	}
	return keys, n
}
