package limiter

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// localTeam is one team's state besides its rate and concurrency counters: what
// Redis keeps in the team's flags, holds, leases, settled and spend keys.
type localTeam struct {
	revoked map[string]bool // key ids
	cutOff  map[string]bool // members
	// epoch is the rebuild marker: 0 after Forget (Redis lost the team's state) until
	// Rebuild; a team Local has never forgotten starts at 1.
	epoch   int64
	holds   map[string]holdRecord
	held    map[string]int64 // member → held sum; "" → the team's
	spend   [kindMonthly + 1]spendCounter
	settled map[string]int64 // request id → when it was settled or swept
	// settledOrder is settled's ids oldest first, so that forgetting the old ones
	// costs nothing per call; earliest is at most the earliest lease end among holds,
	// so that a sweep scans the holds only once one may have ended.
	settledOrder []settledID
	earliest     int64
	queue        localQueue
}

type settledID struct {
	id string
	at int64
}

// holdRecord is one outstanding hold, as admit.lua stores it.
type holdRecord struct {
	member       string
	hold, tokens int64
	memberKind   int64 // budget period kind the hold counts against; 0: none
	memberPeriod int64
	teamKind     int64
	teamPeriod   int64
	memberTPM    int64 // TPM rate of the bucket reserved from; 0: none
	teamTPM      int64
	meta         string
	expiry       int64 // lease end, µs
}

// spendCounter is one period kind's spend hash: the period it counts (p) and spend per
// field, "m:<member>" or "t".
type spendCounter struct {
	exists bool
	p      int64
	fields map[string]int64
}

type tpmState struct{ tokens, ts, rate int64 }

func (l *Local) team(name string) *localTeam {
	t := l.teams[name]
	if t == nil {
		t = newLocalTeam(1)
		l.teams[name] = t
	}
	return t
}

func newLocalTeam(epoch int64) *localTeam {
	return &localTeam{revoked: map[string]bool{}, cutOff: map[string]bool{}, epoch: epoch,
		holds: map[string]holdRecord{}, held: map[string]int64{}, settled: map[string]int64{}}
}

// forget drops everything Local knows about team, as a Redis flush would: the next
// request under a budget or TPM limit is refused with ReasonRebuild. Tests only.
func (l *Local) forget(team string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.teams[team] = newLocalTeam(0)
	for k := range l.buckets {
		if k.team == team {
			delete(l.buckets, k)
		}
	}
	for k := range l.windows {
		if k.team == team {
			delete(l.windows, k)
		}
	}
	for k := range l.slots {
		if k.team == team {
			delete(l.slots, k)
		}
	}
	for k := range l.tpms {
		if k.team == team {
			delete(l.tpms, k)
		}
	}
}

// admission is the ledger part of one Admit: what it read, and the budgets it met.
type admission struct {
	team                 *localTeam
	req                  *Request
	now                  int64
	expired              []ExpiredHold
	heldMember, heldTeam int64
	spend                map[int64]*spendRead
	memberKind, teamKind int64 // budget kinds met; 0: none
	memberTPM, teamTPM   int64 // TPM rates passed
	tightest             bool  // a budget was met: the next three describe the tightest
	tightLeft, tightNext int64
	tightScope           Scope
	fitted               int64 // the hold fit placed; 0: none
}

// spendRead is one period kind's spend as admit.lua reads it.
type spendRead struct {
	index, next          int64 // the current period and when the next starts
	member, team, stored int64 // spent in the current period; the counter's own period
}

func (a *admission) read(kind int64) *spendRead {
	if s := a.spend[kind]; s != nil {
		return s
	}
	s := &spendRead{}
	s.index, s.next = periodAt(kind, a.now)
	c := &a.team.spend[kind]
	if c.exists {
		s.stored = c.p
	}
	if kind == kindTotal || (c.exists && c.p == s.index) {
		s.member, s.team = c.fields["m:"+a.req.Member], c.fields["t"]
	}
	a.spend[kind] = s
	return s
}

// budget checks spent + held + Hold against b.
func (a *admission) budget(scope Scope, b *Budget) check {
	kind := b.Period.kind()
	s := a.read(kind)
	before := b.Limit - s.team - a.heldTeam
	if scope == ScopeMember {
		before = b.Limit - s.member - a.heldMember
		a.memberKind = kind
	} else {
		a.teamKind = kind
	}
	if !a.tightest || before < a.tightLeft {
		a.tightest, a.tightLeft, a.tightScope, a.tightNext = true, before, scope, s.next
	}
	c := check{ok: true, rank: 1, reason: ReasonBudget, scope: scope, budgetLeft: max(0, before), budgetNext: s.next}
	hold := a.req.Hold
	if a.req.FitFloor > 0 {
		hold = a.req.FitFloor
	}
	switch {
	case hold > b.Limit:
		c.ok, c.tooLarge, c.wait = false, true, forever
	case before < hold:
		c.ok = false
	}
	return c
}

// fit lowers the hold of a request with a FitFloor to what its tightest budget has
// left, once every budget passed at the floor (admit.lua does the same after its loop).
func (a *admission) fit() {
	if a.req.FitFloor > 0 && a.tightest && a.tightLeft < a.req.Hold && a.tightLeft >= a.req.FitFloor {
		a.fitted, a.req.Hold = a.tightLeft, a.tightLeft
	}
}

// refused fills d's ledger fields for a refusal by worst.
func (a *admission) refused(d *Decision, worst *check) {
	d.TooLarge, d.Expired = worst.tooLarge, a.expired
	switch {
	case worst.reason == ReasonBudget:
		d.BudgetRemaining, d.BudgetScope, d.BudgetResetsAt = worst.budgetLeft, worst.scope, resetsAt(worst.budgetNext)
	case a.tightest:
		d.BudgetRemaining, d.BudgetScope, d.BudgetResetsAt = max(0, a.tightLeft), a.tightScope, resetsAt(a.tightNext)
	}
}

// admitted stores the request's hold, if it reserves anything, and fills d's ledger
// fields.
func (a *admission) admitted(d *Decision) {
	d.Expired, d.Fitted = a.expired, a.fitted
	if a.tightest {
		d.BudgetRemaining, d.BudgetScope, d.BudgetResetsAt = a.tightLeft-a.req.Hold, a.tightScope, resetsAt(a.tightNext)
	}
	req, t := a.req, a.team
	if !((req.Hold > 0 && (a.memberKind > 0 || a.teamKind > 0)) || (req.Tokens > 0 && (a.memberTPM > 0 || a.teamTPM > 0))) {
		return
	}
	h := holdRecord{member: req.Member, hold: req.Hold, tokens: req.Tokens, memberKind: a.memberKind,
		teamKind: a.teamKind, memberTPM: a.memberTPM, teamTPM: a.teamTPM, meta: req.Meta,
		expiry: a.now + micros(req.Lease)}
	if a.memberKind > 0 {
		h.memberPeriod = a.spend[a.memberKind].index
		if req.Hold > 0 {
			t.held[req.Member] = a.heldMember + req.Hold
		}
	}
	if a.teamKind > 0 {
		h.teamPeriod = a.spend[a.teamKind].index
		if req.Hold > 0 {
			t.held[""] = a.heldTeam + req.Hold
		}
	}
	t.holds[req.RequestID] = h
	if len(t.holds) == 1 || h.expiry < t.earliest {
		t.earliest = h.expiry
	}
	// A period counter still on an earlier period starts the current one, empty.
	for kind := int64(kindDaily); kind <= kindMonthly; kind++ {
		if s := a.spend[kind]; s != nil && (kind == a.memberKind || kind == a.teamKind) && s.stored != s.index {
			t.spend[kind] = spendCounter{exists: true, p: s.index, fields: map[string]int64{}}
		}
	}
	d.Epoch = t.epoch
}

func resetsAt(next int64) time.Time {
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMicro(next).UTC()
}

// charge adds amount to field of kind's counter if that counts period p (a total
// counter always does); a period already over is the ledger's history.
func (t *localTeam) charge(kind, p int64, field string, amount int64) {
	c := &t.spend[kind]
	if kind != kindTotal && (!c.exists || c.p != p) {
		return
	}
	if !c.exists {
		*c = spendCounter{exists: true}
	}
	if c.fields == nil {
		c.fields = map[string]int64{}
	}
	c.fields[field] += amount
}

// sweep charges, removes and reports up to sweepBatch expired holds, oldest first
// (by lease end, then request id, like the leases ZSET).
func (t *localTeam) sweep(now int64) []ExpiredHold {
	if len(t.holds) == 0 || now < t.earliest {
		return nil
	}
	type lease struct {
		expiry int64
		id     string
	}
	var due []lease
	t.earliest = math.MaxInt64
	for id, h := range t.holds {
		if h.expiry <= now {
			due = append(due, lease{h.expiry, id})
		} else {
			t.earliest = min(t.earliest, h.expiry)
		}
	}
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(a, b lease) int { return cmp.Or(cmp.Compare(a.expiry, b.expiry), cmp.Compare(a.id, b.id)) })
	if len(due) > sweepBatch {
		t.earliest = min(t.earliest, due[sweepBatch].expiry)
		due = due[:sweepBatch]
	}
	out := make([]ExpiredHold, 0, len(due))
	for _, d := range due {
		h := t.holds[d.id]
		delete(t.holds, d.id)
		if h.hold > 0 {
			if h.memberKind > 0 {
				t.held[h.member] -= h.hold
				t.charge(h.memberKind, h.memberPeriod, "m:"+h.member, h.hold)
			}
			if h.teamKind > 0 {
				t.held[""] -= h.hold
				t.charge(h.teamKind, h.teamPeriod, "t", h.hold)
			}
		}
		t.remember(d.id, now)
		out = append(out, ExpiredHold{RequestID: d.id, Hold: h.hold, Tokens: h.tokens, Meta: h.meta})
	}
	return out
}

// tpm checks need tokens against a TPM bucket of rate tokens per minute (see the
// script's tpm).
func (l *Local) tpm(key stateKey, scope Scope, rate, need, now int64, a *admission) check {
	capacity := rate * tokenUnit
	tokens, ts := capacity, now
	if s, ok := l.tpms[key]; ok {
		tokens, ts = min(s.tokens, capacity), s.ts
	}
	if now > ts {
		if now-ts >= ceilDiv(capacity-tokens, rate) {
			tokens = capacity
		} else {
			tokens += (now - ts) * rate
		}
		ts = now
	}
	c := check{rank: 2, reason: ReasonTPM, scope: scope, limit: rate, resetUS: ceilDiv(capacity-tokens, rate)}
	if tokens > 0 {
		c.remaining = tokens / tokenUnit
	}
	want := need * tokenUnit
	switch {
	case need > rate:
		c.tooLarge, c.wait = true, forever
		return c
	case tokens < want:
		c.retryUS = ceilDiv(want-tokens, rate)
		c.wait = c.retryUS
		return c
	}
	left := tokens - want
	c.ok = true
	c.remaining = left / tokenUnit
	c.holdReserve(rate, capacity, want, left, c.resetUS)
	c.resetUS = ceilDiv(capacity-left, rate)
	if scope == ScopeMember {
		a.memberTPM = rate
	} else {
		a.teamTPM = rate
	}
	if need > 0 {
		c.commit = func() { l.tpms[key] = tpmState{tokens: left, ts: ts, rate: rate} }
	}
	return c
}

// releaseSlots frees the request's concurrency slots, and nothing else: what Redis
// asks of its fail-open twin, which never holds money or tokens.
func (l *Local) releaseSlots(team, member, requestID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.slots[stateKey{team, member}], requestID)
	delete(l.slots[stateKey{team: team}], requestID)
}

// SettleAll settles each of ss in turn.
func (l *Local) SettleAll(ctx context.Context, ss []Settlement) []error {
	errs := make([]error, len(ss))
	for i, s := range ss {
		_, errs[i] = l.Settle(ctx, s)
	}
	return errs
}

// AdmitAfter settles ss, then admits req.
func (l *Local) AdmitAfter(ctx context.Context, ss []Settlement, req Request) (Decision, []error, error) {
	errs := l.SettleAll(ctx, ss)
	d, err := l.Admit(ctx, req)
	return d, errs, err
}

// Settle replaces the request's hold with its real cost and frees its concurrency
// slots, like the Redis SETTLE script; a replay changes nothing.
func (l *Local) Settle(_ context.Context, s Settlement) (SettleResult, error) {
	if err := s.validate(); err != nil {
		return SettleResult{}, fmt.Errorf("limiter: settle: %w", err)
	}
	now := l.now().UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.team(s.Team)
	h, found := t.holds[s.RequestID]
	if found && h.member != s.Member {
		return SettleResult{}, nil // another member's request: not this settle's to touch
	}
	delete(l.slots[stateKey{s.Team, s.Member}], s.RequestID)
	delete(l.slots[stateKey{team: s.Team}], s.RequestID)
	if !found {
		if at, ok := t.settled[s.RequestID]; ok && at > now-micros(SettledWindow) {
			return SettleResult{Known: true}, nil
		}
		if s.Epoch == 0 || t.epoch == s.Epoch {
			return SettleResult{}, nil
		}
		// Lost. Remember the id either way, so that a replay is not charged (again).
		t.remember(s.RequestID, now)
		if t.epoch == 0 || s.Cost == 0 {
			return SettleResult{}, nil
		}
		// Lost with the team's counters and rebuilt since: charge the counters of the
		// current periods that exist.
		for kind := int64(kindTotal); kind <= kindMonthly; kind++ {
			c := &t.spend[kind]
			if idx, _ := periodAt(kind, now); !c.exists || (kind != kindTotal && c.p != idx) {
				continue
			}
			for _, f := range []string{"m:" + s.Member, "t"} {
				if _, ok := c.fields[f]; ok {
					c.fields[f] += s.Cost
				}
			}
		}
		t.remember(s.RequestID, now)
		return SettleResult{Applied: true, Lost: true}, nil
	}
	delete(t.holds, s.RequestID)
	if h.hold > 0 && h.memberKind > 0 {
		t.held[s.Member] -= h.hold
	}
	if h.hold > 0 && h.teamKind > 0 {
		t.held[""] -= h.hold
	}
	if s.Cost > 0 {
		if h.memberKind > 0 {
			t.charge(h.memberKind, h.memberPeriod, "m:"+s.Member, s.Cost)
		}
		if h.teamKind > 0 {
			t.charge(h.teamKind, h.teamPeriod, "t", s.Cost)
		}
	}
	if h.tokens != s.Tokens {
		if h.memberTPM > 0 {
			l.refund(stateKey{s.Team, s.Member}, h.memberTPM, h.tokens-s.Tokens, now)
		}
		if h.teamTPM > 0 {
			l.refund(stateKey{team: s.Team}, h.teamTPM, h.tokens-s.Tokens, now)
		}
	}
	return SettleResult{Applied: true, Known: true}, nil
}

// remember records the request id as settled and forgets those settled more than
// SettledWindow ago.
func (t *localTeam) remember(id string, now int64) {
	old := now - micros(SettledWindow)
	for len(t.settledOrder) > 0 && t.settledOrder[0].at <= old {
		if e := t.settledOrder[0]; t.settled[e.id] == e.at {
			delete(t.settled, e.id)
		}
		t.settledOrder = t.settledOrder[1:]
	}
	t.settled[id] = now
	t.settledOrder = append(t.settledOrder, settledID{id, now})
}

// refund adds diff tokens (negative: takes them) to a TPM bucket, which may go into
// debt down to maxDebt units.
func (l *Local) refund(key stateKey, rate, diff, now int64) {
	tokens, ts := int64(0), now
	s, ok := l.tpms[key]
	if ok {
		tokens, ts, rate = s.tokens, s.ts, s.rate
	}
	capacity := rate * tokenUnit
	if !ok || tokens > capacity {
		tokens = capacity
	}
	if now > ts {
		if now-ts >= ceilDiv(capacity-tokens, rate) {
			tokens = capacity
		} else {
			tokens += (now - ts) * rate
		}
		ts = now
	}
	tokens = min(max(tokens+diff*tokenUnit, -maxDebt), capacity)
	l.tpms[key] = tpmState{tokens: tokens, ts: ts, rate: rate}
}

// Rebuild restores the team's spend from state if the team has lost it (only ever
// after the tests' forget: Local never loses state on its own); otherwise it does
// nothing.
// Now is the clock Admit reads budget periods on.
func (l *Local) Now(context.Context) (time.Time, error) { return l.now(), nil }

func (l *Local) Rebuild(_ context.Context, team string, state TeamState) error {
	if err := state.validate(); err != nil {
		return fmt.Errorf("limiter: rebuild %s: %w", team, err)
	}
	now := l.now().UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.team(team)
	if t.epoch != 0 {
		return nil
	}
	at := state.At.UnixMicro()
	keep := [kindMonthly + 1]bool{kindTotal: true}
	for kind := int64(kindDaily); kind <= kindMonthly; kind++ {
		ai, _ := periodAt(kind, at)
		ni, _ := periodAt(kind, now)
		if ai > ni {
			return ErrRebuildEarly
		}
		keep[kind] = ai == ni
	}
	t.spend = [kindMonthly + 1]spendCounter{}
	put := func(kind int64, field string, v int64) {
		if !keep[kind] {
			return
		}
		c := &t.spend[kind]
		if !c.exists {
			*c = spendCounter{exists: true, fields: map[string]int64{}}
			c.p, _ = periodAt(kind, now)
		}
		c.fields[field] = v
	}
	for p, v := range state.Team {
		put(p.kind(), "t", v)
	}
	for m, ps := range state.Members {
		for p, v := range ps {
			put(p.kind(), "m:"+m, v)
		}
	}
	for _, h := range state.Holds {
		rec := holdRecord{member: h.Member, hold: h.Hold, memberKind: budgetKind(h.MemberBudget),
			teamKind: budgetKind(h.TeamBudget), meta: h.Meta, expiry: h.Expires.UnixMicro()}
		if rec.memberKind > 0 {
			rec.memberPeriod, _ = periodAt(rec.memberKind, now)
			t.held[h.Member] += h.Hold
		}
		if rec.teamKind > 0 {
			rec.teamPeriod, _ = periodAt(rec.teamKind, now)
			t.held[""] += h.Hold
		}
		t.holds[h.RequestID] = rec
		if len(t.holds) == 1 || rec.expiry < t.earliest {
			t.earliest = rec.expiry
		}
	}
	for _, k := range state.RevokedKeys {
		t.revoked[k] = true
	}
	for _, m := range state.CutOff {
		t.cutOff[m] = true
	}
	t.epoch = newEpoch()
	return nil
}

// newEpoch is a random generation number for a team Local rebuilt, from 1 to 2^52-1: unique
// enough that a hold placed before one loss never matches the marker after another.
func newEpoch() int64 { return 1 + rand.Int64N(maxExact/2-1) }
