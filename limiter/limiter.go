// Package limiter is tollgate's admission core: for every request it decides, for the
// member and for the team, whether the key is revoked, the member cut off, the rate
// limit or the token-per-minute (TPM) limit spent, the concurrency cap full or the
// spend budget exhausted; and after the response it settles what the request really
// cost.
//
// Redis is the implementation that several gateway replicas share: one Lua script per
// request (ADMIT) and one per response (SETTLE) keep admission exact across replicas,
// with Redis TIME as the only clock. Local is its in-process twin with the same
// semantics and the same integer math, used without Redis and as the reference model
// in tests.
//
// # Money and tokens: estimate, hold, settle
//
// ADMIT reserves the request's estimate: Request.Hold micro-dollars against the
// member's and the team's budgets (spent in the current period + held + Hold must stay
// within Budget.Limit) and Request.Tokens against their TPM buckets. The reservation is
// stored under the request id with a lease. SETTLE replaces it with the real figures:
// the hold leaves the held sum and Settlement.Cost is added to the spend of the hold's
// period; reserved−actual tokens go back to the TPM bucket, or, when the request used
// more than it reserved, the excess is taken and the bucket goes negative. That debt
// refuses the member's next requests until it is refilled, so an under-estimate is
// paid back rather than forgiven.
//
// The bound, stated once: a budget is never exceeded by more than the excess
// (Cost − Hold) of the requests that were in flight together when it ran out; with one
// request at a time, by one request's under-estimate. A member whose spend reaches the
// limit is refused even for Hold 0. After Redis loses its state (restart, failover,
// FLUSHALL), add the costs of the requests that were in flight at the loss: their holds
// are gone, so new requests can be admitted into the room they held; their settles
// still charge (see Redis.Settle). Expired holds (a gateway that crashed mid-request)
// are charged in full, never refunded.
//
// # Rebuild
//
// Redis may lose its counters. A per-team marker tells: while it is missing, ADMIT
// refuses every request that carries a budget or a TPM limit with ReasonRebuild,
// writing nothing. The gateway then sums the team's settled spend from its ledger
// (settled and expired rows, not rows still held) and calls Rebuild, which restores
// the counters only if the marker is still missing, so two replicas racing to rebuild
// cannot double-count, and a late rebuild cannot overwrite newer spend; then it
// retries Admit. The marker is a random generation number (Decision.Epoch): a settle
// whose hold was placed in an earlier generation is charged its Cost after the
// rebuild (SettleResult.Lost), since the ledger could not count it. A ledger row
// that reaches the ledger after the rebuild read it (TeamState.Generation says
// which read) is charged by ChargeLate, once. A replica that restarts learns how
// far the counters had come from the ledger (NoteWatermark), so counters restored
// from an older snapshot are rebuilt, not believed.
//
// Requests with neither budget nor TPM are admitted without a marker: their rate and
// concurrency state may start afresh. The marker is per team, so it says nothing
// about such requests: setting it for them would hide another member's lost spend.
// Local never loses its state and never asks for a rebuild.
//
// Redis must not evict keys (maxmemory-policy noeviction): an evicted counter reads as
// unused and admits past its limit.
//
// # Queueing
//
// A request with a QueueWait that is refused only by the team's rate, TPM or
// concurrency limit, with a wait within QueueWait, is not refused: it takes a
// ticket in the team's waiting room and gets ReasonQueued, and comes back after
// RetryAfter with Queued set. Tickets are served by start-time fair queueing on a
// virtual clock V: a ticket starts at S = max(V, F) where F is its member's last
// finish tag, which moves to S + cost × MaxWeight / Weight; the team's limits pass
// only for the ticket with the smallest start (then V = S), so members share the
// team's limits in proportion to their weights however fast each one asks. While
// the room holds tickets, a member whose finish tag is more than queueBacklog of
// its steps past V is backlogged: its requests take tickets, and a team token
// bucket or TPM limit passes them only if it keeps its reserve (queueReserve's
// refill). Any other member asks for no more than its share: its request passes
// at once if the limits do, reserve included, without a ticket or a new finish
// tag, so that a runaway loop cannot make it wait for tokens. Under a team token
// bucket, a request whose turn comes past its QueueWait even if every ticket with
// an earlier start took the bucket's next tokens is refused at once with that
// wait, so a runaway's requests do not fill the room. Member limits and budgets
// never queue. The room's state is in the team's hash (the waiter
// count among the fields ADMIT reads anyway, so an idle room costs no call) and
// one ZSET in its slot; a ticket not renewed within its lease (a replica that
// died) is dropped when it reaches the head, and Leave drops one at once.
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

// Period is the span a Budget counts spend over. Days and months are UTC calendar
// days and months of the limiter's clock (Redis TIME); a new period starts from zero
// at its boundary without any daemon, because spend is counted per period.
type Period string

const (
	PeriodTotal   Period = "total"   // never resets
	PeriodDaily   Period = "daily"   // resets at 00:00 UTC
	PeriodMonthly Period = "monthly" // resets at 00:00 UTC on the 1st
)

// Budget is a spend limit in micro-dollars (1e-6 USD) per Period.
type Budget struct {
	// Limit is the most that may be spent and held in one period. 0 refuses every
	// request that holds anything.
	Limit  int64
	Period Period
}

// Policy is the set of limits that applies to one member or to one team.
type Policy struct {
	Rate        *Rate // nil: no rate limit
	Concurrency int64 // requests in flight at once; 0: no cap
	// TokensPerMinute is a token bucket of that capacity, refilled by that many tokens
	// per minute, from which each request reserves Request.Tokens; 0: none.
	TokensPerMinute int64
	Budget          *Budget // nil: no budget
}

// maxExact is 2^53: Lua 5.1 numbers are doubles, exact for integers only below it.
const maxExact = 1 << 53

// maxMoney bounds budgets, holds and costs (2^51 micro-dollars, about $2.2 billion), so
// that spent + held + hold, and a period's sum of settles, stay far below 2^53.
const maxMoney = maxExact / 4

// MaxMoney is maxMoney for callers that sum spend: a sum saturated here is one every
// limiter call accepts.
const MaxMoney = maxMoney

// tokenUnit is one token in TPM-bucket units: the bucket refills TokensPerMinute units
// per microsecond, so refills are whole numbers with no drift.
const tokenUnit = 60_000_000

// MaxTokens bounds TokensPerMinute, Request.Tokens and Settlement.Tokens: a full
// bucket is at most 2^51 units, and a bucket in debt at most 2^52 units below zero.
const MaxTokens = maxMoney / tokenUnit

// maxDebt is how far below zero a TPM bucket may go, in units (2^52, about 75 million
// tokens): far beyond any real usage, and small enough to keep the math exact.
const maxDebt = maxExact / 2

// maxPeriod bounds Period and Lease so that now+period stays far below 2^53 µs.
const maxPeriod = 366 * 24 * time.Hour

// The bounds Validate holds a Policy to, for callers that check each field
// on its own and name it: MaxPeriod for Rate.Period, MaxRateLimit for
// Rate.Limit, MaxConcurrency for Policy.Concurrency (MaxMoney and MaxTokens
// bound the budget and TokensPerMinute).
const (
	MaxPeriod      = maxPeriod
	MaxRateLimit   = maxExact / 4
	MaxConcurrency = maxExact - 1
)

// Validate reports every problem with p at once, including limits whose scaled integer
// math could pass 2^53 inside the Lua script, where it would silently lose precision.
func (p Policy) Validate() error {
	var errs []error
	if p.Concurrency < 0 || p.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("concurrency must be from 0 (no cap) to 2^53-1, got %d", p.Concurrency))
	}
	if p.TokensPerMinute < 0 || p.TokensPerMinute > MaxTokens {
		errs = append(errs, fmt.Errorf("tokens per minute must be from 0 (none) to %d, got %d", MaxTokens, p.TokensPerMinute))
	}
	if b := p.Budget; b != nil {
		if b.Limit < 0 || b.Limit > maxMoney {
			errs = append(errs, fmt.Errorf("budget limit must be from 0 to 2^51 micro-dollars, got %d", b.Limit))
		}
		if b.Period.kind() == 0 {
			errs = append(errs, fmt.Errorf("budget period must be %q, %q or %q, got %q",
				PeriodTotal, PeriodDaily, PeriodMonthly, b.Period))
		}
	}
	if r := p.Rate; r != nil {
		if r.Algorithm != AlgorithmTokenBucket && r.Algorithm != AlgorithmSlidingWindow {
			errs = append(errs, fmt.Errorf("rate algorithm must be %q or %q, got %q",
				AlgorithmTokenBucket, AlgorithmSlidingWindow, r.Algorithm))
		}
		if r.Limit < 1 || r.Limit > MaxRateLimit {
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
		case r.Algorithm == AlgorithmTokenBucket && r.Limit >= 1 && r.Limit <= MaxRateLimit && periodOK:
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

// ledger reports whether p needs the ledger part of ADMIT: a budget or a TPM limit.
func (p *Policy) ledger() bool { return p.Budget != nil || p.TokensPerMinute > 0 }

// share is p as enforced by one of n replicas deciding alone: each limit divided by n,
// at least 1, so that n replicas together stay near the shared limit. Budgets and TPM
// are never decided alone (such requests fail closed), so they are left as they are.
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

// maxMeta bounds Request.Meta, which is stored with the hold.
const maxMeta = 1024

// Request is one request asking for admission.
type Request struct {
	Team, Member, KeyID string
	// RequestID is unique per request within the team (the gateway generates it; a
	// client's X-Request-Id must never be used): the concurrency lease, the
	// sliding-window entry and the hold are keyed by it, so two requests in the same
	// microsecond never collapse into one. Admitting an id again moves its rate and
	// concurrency entries rather than adding more; admitting an id whose hold is still
	// outstanding is an error.
	RequestID    string
	MemberPolicy Policy
	TeamPolicy   Policy
	// Lease is how long a concurrency slot and a hold are kept if Settle never comes (a
	// crashed gateway); required when either policy has a concurrency cap, or a hold
	// is placed. Make it longer than the longest request (streams included): a hold
	// whose lease ends is charged in full and reported in Decision.Expired.
	Lease time.Duration
	// Hold is the estimated cost in micro-dollars, reserved against the member's and
	// the team's budgets until Settle; 0 for a free route.
	Hold int64
	// FitFloor, when above 0, lets a request whose Hold does not fit what is left of
	// its budgets be admitted with a smaller hold: the least of what the member's and
	// the team's budgets have left, if that is at least FitFloor (the hold of the
	// smallest output cap worth forwarding). The budgets refuse only below FitFloor,
	// and Decision.Fitted says what was held, decided in the same atomic step as the
	// check. From 0 to Hold; 0 refuses as before.
	FitFloor int64
	// Tokens is the estimated token count, reserved against the member's and the
	// team's TPM buckets until Settle.
	Tokens int64
	// Meta is stored with the hold and returned when the hold expires unsettled
	// (ExpiredHold.Meta), e.g. the member and key ids for the ledger row. At most 1 KiB.
	Meta string
	// FailOpen decides when Redis is unreachable: false refuses with ReasonUnavailable,
	// true admits through a per-replica local limiter at each limit divided by the
	// number of replicas. A request under a budget or a TPM limit always fails closed:
	// spend cannot be checked without the shared counters.
	FailOpen bool
	// QueueWait is how much longer the request may wait in the team's waiting room
	// (see Queueing); 0: it never queues, and is refused as before.
	QueueWait time.Duration
	// Weight is the member's share of the team's limits in the waiting room, from 1
	// to MaxWeight; 0 means 1.
	Weight int64
	// Queued is set when the request is admitted again after a ReasonQueued
	// decision, with the same RequestID: it holds a ticket in the waiting room.
	Queued bool
}

// MaxWeight bounds Request.Weight.
const MaxWeight = 1000

// queues reports whether req may wait in the team's waiting room: it has a wait
// budget and the team has a limit the room shares out that the request consumes.
func (r *Request) queues() bool {
	t := &r.TeamPolicy
	return r.QueueWait > 0 && (t.Rate != nil || t.Concurrency > 0 || (t.TokensPerMinute > 0 && r.Tokens > 0))
}

// queueStep is how far a ticket moves its member's finish tag on the virtual
// clock: its cost (the tokens it reserves under a team TPM limit, else 1) times
// MaxWeight over its weight, so tags stay integers and weight 1000 steps by cost.
func (r *Request) queueStep() int64 {
	cost := int64(1)
	if r.TeamPolicy.TokensPerMinute > 0 && r.Tokens > 0 {
		cost = r.Tokens
	}
	w := r.Weight
	if w == 0 {
		w = 1
	}
	return cost * MaxWeight / w
}

// ledger reports whether the request needs the ledger part of ADMIT.
func (r *Request) ledger() bool { return r.MemberPolicy.ledger() || r.TeamPolicy.ledger() }

// Settles reports whether an admitted request leaves Settle anything to do: a
// hold, or a concurrency slot. The settle of any other changes nothing, and its
// caller may skip it (a model list or a token count costs one script call, not two).
func (r *Request) Settles() bool {
	return r.reserves() || r.MemberPolicy.Concurrency > 0 || r.TeamPolicy.Concurrency > 0
}

// reserves reports whether an admitted request stores a hold: it reserves money
// against a budget or tokens against a TPM limit.
func (r *Request) reserves() bool {
	return (r.Hold > 0 && (r.MemberPolicy.Budget != nil || r.TeamPolicy.Budget != nil)) ||
		(r.Tokens > 0 && (r.MemberPolicy.TokensPerMinute > 0 || r.TeamPolicy.TokensPerMinute > 0))
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
	if r.Hold < 0 || r.Hold > maxMoney {
		errs = append(errs, fmt.Errorf("hold must be from 0 to 2^51 micro-dollars, got %d", r.Hold))
	}
	if r.FitFloor < 0 || r.FitFloor > r.Hold {
		errs = append(errs, fmt.Errorf("fit floor must be from 0 to the hold (%d), got %d", r.Hold, r.FitFloor))
	}
	if r.Tokens < 0 || r.Tokens > MaxTokens {
		errs = append(errs, fmt.Errorf("tokens must be from 0 to %d, got %d", MaxTokens, r.Tokens))
	}
	if r.Weight < 0 || r.Weight > MaxWeight {
		errs = append(errs, fmt.Errorf("weight must be from 0 (= 1) to %d, got %d", MaxWeight, r.Weight))
	}
	if r.QueueWait < 0 || r.QueueWait > maxQueueWait {
		errs = append(errs, fmt.Errorf("queue wait must be from 0 (none) to %s, got %s", maxQueueWait, r.QueueWait))
	}
	if len(r.Meta) > maxMeta {
		errs = append(errs, fmt.Errorf("meta must be at most %d bytes, got %d", maxMeta, len(r.Meta)))
	}
	if r.MemberPolicy.Concurrency > 0 || r.TeamPolicy.Concurrency > 0 || r.reserves() {
		if r.Lease < time.Microsecond || r.Lease > maxPeriod {
			errs = append(errs, fmt.Errorf("lease must be from 1µs to %s when a concurrency cap is set or a hold is placed, got %s",
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
	ReasonBudget      Reason = "budget" // spent + held + Hold would pass the budget
	ReasonTPM         Reason = "tpm"    // the TPM bucket holds fewer than Tokens
	// ReasonRebuild: Redis lost the team's counters; call Rebuild, then Admit again.
	ReasonRebuild     Reason = "rebuild"
	ReasonUnavailable Reason = "unavailable" // Redis unreachable and the request fails closed
	// ReasonQueued: the request holds a ticket in the team's waiting room; Admit it
	// again with Queued set after RetryAfter, or Leave.
	ReasonQueued Reason = "queued"
)

// Scope says whose limit a Decision reports.
type Scope string

const (
	ScopeMember Scope = "member"
	ScopeTeam   Scope = "team"
)

// Decision is the verdict on one request and the numbers for the response headers.
//
// Limit, Remaining and Reset describe the tightest rate limit (fewest requests
// remaining) when allowed, and the refusing limit when refused: for ReasonTPM they are
// in tokens (TokensPerMinute, whole tokens left, time until full); for ReasonBudget
// they are zero and the Budget fields describe the refusing budget.
//
// When several limits refuse, a budget wins, then a rate or TPM limit (the longest
// wait; TooLarge counts as forever), then a concurrency cap; among equals, the member
// before the team.
type Decision struct {
	Allowed bool
	Reason  Reason
	Scope   Scope
	Limit   int64
	// Remaining is how many more requests (ReasonTPM: tokens) the limit admits now.
	Remaining int64
	// Reset is how long until the limit is fully replenished.
	Reset time.Duration
	// RetryAfter is, for a rate or TPM refusal, exactly how long until this request
	// would be admitted if nothing else spends the limit meanwhile; for a concurrency
	// refusal, the time until the earliest lease expires, at most a second (slots
	// usually return sooner); 0 for a budget refusal (see BudgetResetsAt) and when
	// TooLarge.
	RetryAfter time.Duration
	// TooLarge is set on a refusal that no wait can lift: the request alone is larger
	// than the refusing limit (Tokens > TokensPerMinute, or Hold > Budget.Limit). The
	// gateway should say so rather than ask the client to retry.
	TooLarge bool
	// BudgetRemaining is the tightest of the member's and the team's budgets, in
	// micro-dollars: what is left after this hold when allowed, before it when refused
	// (never below 0). -1 when no budget applies or the refusal came before the budgets
	// were read (revoked, cut off, rebuild).
	BudgetRemaining int64
	// BudgetScope is whose budget BudgetRemaining describes.
	BudgetScope Scope
	// BudgetResetsAt is when that budget's period ends; zero for a total budget.
	BudgetResetsAt time.Time
	// Fitted is, when Request.FitFloor let an allowed request fit its budgets with
	// a smaller hold, the hold placed (from FitFloor to less than Request.Hold); 0
	// when the whole Hold was placed or the request was refused.
	Fitted int64
	// Epoch identifies the generation of the team's counters the request's hold was
	// placed in; pass it to Settle. 0 when no hold was stored.
	Epoch int64
	// TeamEpoch and Seq are how far the team's counters had come once this
	// decision was taken: their epoch and the team's admission count (this
	// admission included). 0 when none were read (no budget or TPM applied, or
	// the Local limiter). Kept durably, they let a replica that has not read the
	// team tell counters older than these (Redis.NoteWatermark).
	TeamEpoch, Seq int64
	// Expired lists holds of the team whose lease ran out unsettled (a gateway crashed
	// mid-request), swept by this call: each was charged in full to its period, never
	// refunded, and its tokens stay spent. The gateway should record them as uncertain.
	// Up to 100 per call, oldest first; swept whatever the verdict.
	Expired []ExpiredHold
	// Degraded is set when the decision was made without Redis (fail-open).
	Degraded bool
	// At is the limiter's clock (Redis TIME) when it decided a request that can
	// hold a reservation: the instant it charged the budget periods at, which the
	// ledger files the request under. Zero for other decisions.
	At time.Time
	// QueueDepth and QueuePosition are, for ReasonQueued, the tickets in the team's
	// waiting room and how many of them are ahead of this one.
	QueueDepth, QueuePosition int64
}

// ExpiredHold is a hold whose lease ended before its request was settled.
type ExpiredHold struct {
	RequestID string
	Hold      int64 // micro-dollars, now charged as spent
	Tokens    int64 // tokens, kept as spent
	Meta      string
}

// Settlement is what a request really cost, reported after its response.
type Settlement struct {
	Team, Member, RequestID string
	// Cost is the actual cost in micro-dollars; 0 with Tokens 0 releases the hold (only
	// for a request that provably never reached the upstream).
	Cost int64
	// Tokens is the actual token count.
	Tokens int64
	// Epoch is Decision.Epoch from the request's Admit. It lets a settle whose hold
	// Redis lost (restart, flush) be charged after the team was rebuilt; with 0 such a
	// settle changes nothing.
	Epoch int64
}

func (s *Settlement) validate() error {
	var errs []error
	if s.Team == "" || s.Member == "" || s.RequestID == "" {
		errs = append(errs, errors.New("team, member and request id must be set"))
	}
	if s.Cost < 0 || s.Cost > maxMoney {
		errs = append(errs, fmt.Errorf("cost must be from 0 to 2^51 micro-dollars, got %d", s.Cost))
	}
	if s.Tokens < 0 || s.Tokens > MaxTokens {
		errs = append(errs, fmt.Errorf("tokens must be from 0 to %d, got %d", MaxTokens, s.Tokens))
	}
	return errors.Join(errs...)
}

// SettleResult says what a Settle did. Concurrency slots are freed whatever it says.
type SettleResult struct {
	// Applied is set when this call changed spend or tokens: it settled the hold, or
	// (Lost) charged Cost after Redis had lost the hold.
	Applied bool
	// Known is set when the request id had a hold, or its hold was swept as
	// expired or charged as lost within the last SettledWindow. A replayed settle
	// finds no hold and is neither Applied nor Known, like a request id never
	// admitted (or admitted without a hold).
	Known bool
	// Lost is set when the hold had been lost with Redis's state and the team was
	// rebuilt since: Cost was charged to the current periods instead.
	Lost bool
}

// SettledWindow is how long a request id whose hold was swept or charged as lost
// is remembered, so that a late or replayed settle of it is not charged (again).
// Replays of an ordinary settle need no memory: the hold is gone.
const SettledWindow = 2 * time.Minute

// TeamState is a team's spend as the gateway's ledger knows it, for Rebuild.
type TeamState struct {
	// At is the instant the sums describe: each is the spend in the period containing
	// At. Use the limiter's clock as far as possible; if At is in a later period than
	// the limiter's clock, Rebuild fails and should be retried; if in an earlier one,
	// those sums are of a period already over and are dropped.
	At time.Time
	// Team is the team's own spend per period.
	Team map[Period]int64
	// Members is each member's spend per period. List every budget that applies, zero
	// spend included: a settle whose hold was lost is charged only to counters that
	// exist.
	Members map[string]map[Period]int64
	// RevokedKeys and CutOff restore the revocations and cut-offs that Redis mirrored.
	RevokedKeys, CutOff []string
	// Holds are the requests still in flight (admitted, not yet settled): each holds
	// its amount again against the member's and the team's budgets in the current
	// period, until it settles at its real cost or its lease ends (then it is swept
	// and charged in full, like any hold whose replica died).
	Holds []RebuiltHold
	// Generation is the ledger's rebuild generation the sums were read in (see
	// Redis.ChargeLate); 0 for a ledger that has none.
	Generation int64
	// Counted lists the request ids whose spend the sums count although the
	// ledger the generation read did not have them (the rebuilding replica's
	// rows not written yet), so that a late charge of them is not made.
	Counted []string
}

// RebuiltHold is a hold restored by Rebuild.
type RebuiltHold struct {
	RequestID, Member string
	Hold              int64 // micro-dollars
	// MemberBudget and TeamBudget are the periods of the budgets it counts against;
	// "" for none.
	MemberBudget, TeamBudget Period
	Expires                  time.Time
	Meta                     string // as Request.Meta
}

func (s *TeamState) validate() error {
	var errs []error
	check := func(who string, m map[Period]int64) {
		for p, v := range m {
			if p.kind() == 0 {
				errs = append(errs, fmt.Errorf("%s: unknown period %q", who, p))
			}
			if v < 0 || v >= maxExact {
				errs = append(errs, fmt.Errorf("%s: %s spend must be from 0 to 2^53-1, got %d", who, p, v))
			}
		}
	}
	check("team", s.Team)
	for m, ps := range s.Members {
		check("member "+m, ps)
	}
	for _, h := range s.Holds {
		if h.RequestID == "" || h.Member == "" || h.Hold < 0 || h.Hold > maxMoney || len(h.Meta) > maxMeta || h.Expires.IsZero() ||
			(h.MemberBudget != "" && h.MemberBudget.kind() == 0) || (h.TeamBudget != "" && h.TeamBudget.kind() == 0) {
			errs = append(errs, fmt.Errorf("hold %q of member %q: request id and member must be set, the hold from 0 to 2^51, the meta at most %d bytes, the expiry set, the periods known", h.RequestID, h.Member, maxMeta))
		}
	}
	if s.At.IsZero() {
		errs = append(errs, errors.New("at is zero"))
	}
	return errors.Join(errs...)
}

// ErrRebuildEarly is returned by Rebuild when TeamState.At lies in a later period than
// the limiter's clock (a gateway clock ahead across a day or month boundary): storing
// those sums now would forget the current period's spend. Retry shortly.
var ErrRebuildEarly = errors.New("limiter: rebuild: TeamState.At is in a later period than the limiter's clock")

// ErrHoldExists is returned by Admit for a request id whose hold is still outstanding:
// request ids must be unique per team, or one request could settle another's hold.
var ErrHoldExists = errors.New("limiter: request id already holds a reservation")

// ErrSettleNotSent is AdmitAfter's error for a settle it did not send (the
// admission never reached Redis): the caller still has it to send.
var ErrSettleNotSent = errors.New("limiter: settle not sent")

// Limiter admits and settles requests, and mirrors the revocations and cut-offs it
// enforces.
type Limiter interface {
	Admit(ctx context.Context, req Request) (Decision, error)
	// Settle replaces the request's hold with its real cost and frees its concurrency
	// slots; a replay changes nothing.
	Settle(ctx context.Context, s Settlement) (SettleResult, error)
	// SettleAll settles many requests, in one round trip where the limiter can,
	// and returns each one's error (nil: applied, or a replay).
	SettleAll(ctx context.Context, ss []Settlement) []error
	// AdmitAfter settles ss and then admits req, in one round trip where the
	// limiter can: a member's earlier requests are settled before its next one
	// is decided, without a round trip of their own. It returns each settle's
	// error as SettleAll does, or ErrSettleNotSent for one it did not send.
	AdmitAfter(ctx context.Context, ss []Settlement, req Request) (Decision, []error, error)
	// Rebuild restores a team's spend after Redis lost it (Admit said ReasonRebuild),
	// unless another replica already did.
	Rebuild(ctx context.Context, team string, state TeamState) error
	// SetKeyRevoked is called by the store on every revoke, so that every replica
	// refuses the key at its next request without waiting for a config snapshot.
	SetKeyRevoked(ctx context.Context, team, keyID string, revoked bool) error
	// SetMemberCutOff is called by the store on every cut-off and restore.
	SetMemberCutOff(ctx context.Context, team, member string, cutOff bool) error
	// Leave takes the request's ticket out of the team's waiting room (its caller
	// gave up or went away); a request without a ticket changes nothing.
	Leave(ctx context.Context, team, requestID string) error
}

// concurrencyRetryCap bounds RetryAfter for a concurrency refusal: a slot usually
// frees when a response completes, long before the lease that bounds it expires.
const concurrencyRetryCap = time.Second

// unavailableRetry is the RetryAfter of a fail-closed refusal.
const unavailableRetry = time.Second

// sweepBatch is how many expired holds one ADMIT sweeps at most, so that one call
// after a mass crash stays short.
const sweepBatch = 100

// The waiting room's timing. A waiter is told to come back after at least
// queueMinPoll and at most queueMaxPoll (its own wait, times one more than the
// tickets ahead of it), and its ticket lives queueGrace past that: a ticket whose
// caller's replica died blocks the head of the room for at most that long.
const (
	queueMinPoll = time.Millisecond
	queueMaxPoll = 50 * time.Millisecond
	queueGrace   = 250 * time.Millisecond
	maxQueueWait = time.Minute
	// queueRebase is how far the virtual clock may run before an empty room
	// starts it again from zero, keeping tags far below 2^53.
	queueRebase = 1 << 44
	// queueReserve is how much of its refill a team bucket holds back, while the
	// room holds tickets, from members more than queueBacklog of their own steps
	// ahead of the virtual clock (at most half of what is left), so that a member
	// asking for no more than its share is admitted at once beside a runaway.
	queueReserve = 500 * time.Millisecond
	queueBacklog = 2
)

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }
