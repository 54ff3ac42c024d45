// Package limiter is tollgate's admission core: for every request it decides, for the
// member and for the team, whether the key is revoked, the member cut off, the rate
// limit spent or the concurrency cap full.
//
// Redis is the implementation that several gateway replicas share: one Lua script per
// request (ADMIT) and one per response (RELEASE) keep admission exact across replicas,
// with Redis TIME as the only clock. Local is its in-process twin with the same
// semantics and the same integer math, used without Redis and as the reference model
// in tests.
package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Algorithm names how a Rate counts requests.
type Algorithm string

const (
	// AlgorithmTokenBucket refills Limit tokens per Period into a bucket holding at
	// most Burst; a request takes one token. Bursts up to Burst are allowed.
	AlgorithmTokenBucket Algorithm = "token_bucket"
	// AlgorithmSlidingWindow admits at most Limit requests in any rolling Period. It is
	// exact but stores one entry per admitted request.
	AlgorithmSlidingWindow Algorithm = "sliding_window"
)

// Rate is a request-rate limit.
type Rate struct {
	Algorithm Algorithm
	// Limit is the number of requests per Period (token bucket: the refill).
	Limit int64
	// Period is the window (sliding window) or the refill period (token bucket); a whole
	// number of microseconds, the resolution of Redis TIME.
	Period time.Duration
	// Burst is the token bucket's capacity; 0 means Limit. Must be 0 for a sliding window.
	Burst int64
}

// Policy is the set of limits that applies to one member or to one team.
type Policy struct {
	Rate        *Rate // nil: no rate limit
	Concurrency int64 // requests in flight at once; 0: no cap
}

// maxExact is 2^53: Lua 5.1 numbers are doubles, exact for integers only below it.
const maxExact = 1 << 53

// maxPeriod bounds Period and Lease so that now+period stays far below 2^53 µs.
const maxPeriod = 366 * 24 * time.Hour

// Validate reports every problem with p at once, including limits whose scaled integer
// math could pass 2^53 inside the Lua script, where it would silently lose precision.
func (p Policy) Validate() error {
	var errs []error
	if p.Concurrency < 0 || p.Concurrency >= maxExact {
		errs = append(errs, fmt.Errorf("concurrency must be from 0 (no cap) to 2^53-1, got %d", p.Concurrency))
	}
	if r := p.Rate; r != nil {
		if r.Algorithm != AlgorithmTokenBucket && r.Algorithm != AlgorithmSlidingWindow {
			errs = append(errs, fmt.Errorf("rate algorithm must be %q or %q, got %q",
				AlgorithmTokenBucket, AlgorithmSlidingWindow, r.Algorithm))
		}
		if r.Limit < 1 || r.Limit > maxExact/4 {
			errs = append(errs, fmt.Errorf("rate limit must be from 1 to 2^51, got %d", r.Limit))
		}
		periodOK := r.Period >= time.Microsecond && r.Period <= maxPeriod && r.Period%time.Microsecond == 0
		if !periodOK {
			errs = append(errs, fmt.Errorf("rate period must be a whole number of microseconds from 1µs to %s, got %s",
				maxPeriod, r.Period))
		}
		switch {
		case r.Algorithm == AlgorithmSlidingWindow && r.Burst != 0:
			errs = append(errs, fmt.Errorf("rate burst applies only to %s, got %d for %s",
				AlgorithmTokenBucket, r.Burst, AlgorithmSlidingWindow))
		case r.Burst < 0:
			errs = append(errs, fmt.Errorf("rate burst must be 0 (= limit) or more, got %d", r.Burst))
		case r.Algorithm == AlgorithmTokenBucket && r.Limit >= 1 && r.Limit <= maxExact/4 && periodOK:
			// The script keeps tokens in units of 1/period: a full bucket is
			// burst×period(µs) units, and its largest division adds a period and two
			// limits to that; all of it must stay below 2^53.
			if burst, us := r.burst(), micros(r.Period); burst > (maxExact-1-2*r.Limit)/us-1 {
				errs = append(errs, fmt.Errorf("rate (burst+1) × period(µs) + 2 × limit must stay below 2^53, where Lua's numbers stop being exact integers; got (%d+1) × %dµs + 2 × %d; lower the burst or the period",
					burst, us, r.Limit))
			}
		}
	}
	return errors.Join(errs...)
}

// burst is the bucket capacity, defaulting to Limit.
func (r *Rate) burst() int64 {
	if r.Burst == 0 {
		return r.Limit
	}
	return r.Burst
}

// share is p as enforced by one of n replicas deciding alone: each limit divided by n,
// at least 1, so that n replicas together stay near the shared limit.
func (p Policy) share(n int64) Policy {
	if n <= 1 {
		return p
	}
	if p.Rate != nil {
		r := *p.Rate
		r.Limit = max(1, r.Limit/n)
		if r.Burst != 0 {
			r.Burst = max(1, r.Burst/n)
		}
		p.Rate = &r
	}
	if p.Concurrency > 0 {
		p.Concurrency = max(1, p.Concurrency/n)
	}
	return p
}

// Request is one request asking for admission.
type Request struct {
	Team, Member, KeyID string
	// RequestID is unique per request (the gateway generates it): the concurrency lease
	// and the sliding-window entry are keyed by it, so two requests in the same
	// microsecond never collapse into one. Admitting an id again moves its entries
	// rather than adding more.
	RequestID    string
	MemberPolicy Policy
	TeamPolicy   Policy
	// Lease is how long a concurrency slot is held if Release never comes (a crashed
	// gateway); required when either policy has a concurrency cap.
	Lease time.Duration
	// FailOpen decides when Redis is unreachable: false refuses with ReasonUnavailable,
	// true admits through a per-replica local limiter at each limit divided by the
	// number of replicas.
	FailOpen bool
}

func (r *Request) validate() error {
	var errs []error
	if r.Team == "" {
		errs = append(errs, errors.New("team is empty"))
	}
	if r.Member == "" {
		errs = append(errs, errors.New("member is empty"))
	}
	if r.RequestID == "" {
		errs = append(errs, errors.New("request id is empty"))
	}
	if err := r.MemberPolicy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("member policy: %w", err))
	}
	if err := r.TeamPolicy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("team policy: %w", err))
	}
	if r.MemberPolicy.Concurrency > 0 || r.TeamPolicy.Concurrency > 0 {
		if r.Lease < time.Microsecond || r.Lease > maxPeriod {
			errs = append(errs, fmt.Errorf("lease must be from 1µs to %s when a concurrency cap is set, got %s",
				maxPeriod, r.Lease))
		}
	}
	return errors.Join(errs...)
}

// Reason says why a request was refused; empty when it was allowed.
type Reason string

const (
	ReasonRate        Reason = "rate"
	ReasonConcurrency Reason = "concurrency"
	ReasonRevoked     Reason = "revoked"
	ReasonCutOff      Reason = "cut_off"
	ReasonUnavailable Reason = "unavailable" // Redis unreachable and the request fails closed
)

// Scope says whose limit a Decision reports.
type Scope string

const (
	ScopeMember Scope = "member"
	ScopeTeam   Scope = "team"
)

// Decision is the verdict on one request and the numbers for the rate-limit headers.
//
// Limit, Remaining and Reset describe the tightest rate limit (fewest requests
// remaining) when allowed, and the refusing limit when refused. When several limits
// refuse, a rate limit wins over a concurrency cap and, among equals, the longest wait.
type Decision struct {
	Allowed bool
	Reason  Reason
	Scope   Scope
	Limit   int64
	// Remaining is how many more requests the limit admits right now.
	Remaining int64
	// Reset is how long until the limit is fully replenished.
	Reset time.Duration
	// RetryAfter is, for a rate refusal, exactly how long until this request would be
	// admitted if nothing else spends the limit meanwhile; for a concurrency refusal, the
	// time until the earliest lease expires, at most a second (slots usually return sooner).
	RetryAfter time.Duration
	// Degraded is set when the decision was made without Redis (fail-open).
	Degraded bool
}

// Limiter admits requests and mirrors the revocations and cut-offs it enforces.
type Limiter interface {
	Admit(ctx context.Context, req Request) (Decision, error)
	// Release frees the request's concurrency slots; releasing twice is harmless.
	Release(ctx context.Context, team, member, requestID string) error
	// SetKeyRevoked is called by the store on every revoke, so that every replica
	// refuses the key at its next request without waiting for a config snapshot.
	SetKeyRevoked(ctx context.Context, team, keyID string, revoked bool) error
	// SetMemberCutOff is called by the store on every cut-off and restore.
	SetMemberCutOff(ctx context.Context, team, member string, cutOff bool) error
}

// concurrencyRetryCap bounds RetryAfter for a concurrency refusal: a slot usually
// frees when a response completes, long before the lease that bounds it expires.
const concurrencyRetryCap = time.Second

// unavailableRetry is the RetryAfter of a fail-closed refusal.
const unavailableRetry = time.Second

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }
