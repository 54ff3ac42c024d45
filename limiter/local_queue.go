package limiter

import (
	"cmp"
	"context"
	"slices"
)

// localQueue is a team's waiting room as admit.lua keeps it: the virtual time,
// the ticket count and the tag generation (field w), the tickets by start tag
// (the queue ZSET), their lease ends (t:<id>) and each member's last finish tag
// (f:<member>).
type localQueue struct {
	v, n, gen int64
	tickets   []ticket // sorted by (start, id), like the ZSET
	leases    map[string]int64
	finish    map[string]finishTag
}

type ticket struct {
	start int64
	id    string
}

type finishTag struct{ f, gen int64 }

func compareTickets(a, b ticket) int {
	return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.id, b.id))
}

func (q *localQueue) remove(id string) bool {
	i := slices.IndexFunc(q.tickets, func(t ticket) bool { return t.id == id })
	if i < 0 {
		return false
	}
	q.tickets = slices.Delete(q.tickets, i, i+1)
	delete(q.leases, id)
	return true
}

// before counts the tickets whose start tag is earlier than start.
func (q *localQueue) before(start int64) int64 {
	i, _ := slices.BinarySearchFunc(q.tickets, ticket{start: start}, compareTickets)
	return int64(i)
}

func (q *localQueue) rank(id string) int64 {
	return int64(slices.IndexFunc(q.tickets, func(t ticket) bool { return t.id == id }))
}

// queue is admit.lua's waiting room, step for step, on the checks already run
// (nothing committed yet). It returns the decision when the request is queued;
// otherwise nil, and the caller decides on checks as without a room.
func (l *Local) queue(t *localTeam, req *Request, now int64, checks []check, a *admission) *Decision {
	if !req.queues() {
		return nil
	}
	hard, refused, qw := false, false, int64(0)
	var tn *turn
	for i := range checks {
		c := &checks[i]
		if c.turn != nil {
			tn = c.turn
		}
		if c.ok {
			continue
		}
		refused = true
		if c.scope == ScopeTeam && c.rank == 3 {
			qw = max(qw, min(c.wait, micros(queueMaxPoll)))
		} else if c.scope == ScopeTeam && c.rank > 1 {
			qw = max(qw, c.wait)
		} else {
			hard = true
		}
	}
	q := &t.queue
	maxWait := micros(req.QueueWait)
	_, mine := q.leases[req.RequestID]
	mine = mine && req.Queued
	if !(q.n > 0 || mine || (refused && !hard && qw <= maxWait)) {
		return nil
	}
	head, headStart, found := "", int64(0), false
	for dropped := 0; q.n > 0 && dropped < sweepBatch; dropped++ {
		if len(q.tickets) == 0 {
			q.n = 0
			break
		}
		h := q.tickets[0]
		if (mine && h.id == req.RequestID) || q.leases[h.id] > now {
			head, headStart, found = h.id, h.start, true
			break
		}
		q.remove(h.id)
		q.n--
	}
	// Backlogged members may not take a team bucket's reserve; any other member
	// whose start tag is before the head's passes at once (admit.lua says why).
	var last int64
	if f, ok := q.finish[req.Member]; ok && f.gen == q.gen {
		last = f.f
	}
	backlogged := q.n > 0 && last-q.v > queueBacklog*req.queueStep()
	if backlogged && !refused {
		// The longest wait for a reserve, the first on ties, refuses instead.
		short := -1
		for i := range checks {
			if r := checks[i].reserve; r != nil && (short < 0 || r.wait > checks[short].reserve.wait) {
				short = i
			}
		}
		if short >= 0 {
			checks[short] = *checks[short].reserve
			refused, qw = true, max(qw, checks[short].wait)
		}
	}
	start := max(q.v, last)
	const (
		admit = iota + 1
		refuse
		wait
		take
	)
	out, leave := refuse, false
	var early *check
	switch {
	case hard:
		leave = mine
	case mine:
		switch {
		case found && head == req.RequestID && !refused:
			out, leave, q.v = admit, true, headStart
		case qw > maxWait:
			leave = true
		default:
			out = wait
		}
	case !refused && q.n == 0:
		out = admit
	case !refused && found && !backlogged && start <= headStart:
		out, q.v = admit, start
	case qw <= maxWait:
		out = take
		// Refused now if its turn, behind the tickets with earlier start tags, comes
		// too late (admit.lua says why).
		if tn != nil {
			if early = tn.behind(q.before(start), maxWait); early != nil {
				out = refuse
			}
		}
	}
	if leave {
		q.remove(req.RequestID)
		q.n--
	}
	if out == take {
		if q.n == 0 && q.v >= queueRebase {
			q.v, q.gen, start = 0, q.gen+1, 0
		}
		tk := ticket{start: start, id: req.RequestID}
		i, _ := slices.BinarySearchFunc(q.tickets, tk, compareTickets)
		q.tickets = slices.Insert(q.tickets, i, tk)
		if q.finish == nil {
			q.finish = map[string]finishTag{}
		}
		q.finish[req.Member] = finishTag{f: start + req.queueStep(), gen: q.gen}
		q.n++
	}
	if early != nil {
		// Considered after every other check, as admit.lua does.
		d := decide(append(checks, *early), a)
		return &d
	}
	if out < wait {
		return nil
	}
	var pos int64
	if !found || head != req.RequestID {
		pos = q.rank(req.RequestID)
	}
	poll := min(micros(queueMaxPoll), max(micros(queueMinPoll), qw)*(pos+1))
	if q.leases == nil {
		q.leases = map[string]int64{}
	}
	q.leases[req.RequestID] = now + poll + micros(queueGrace)
	d := decide([]check{{rank: 2, wait: poll, reason: ReasonQueued, scope: ScopeTeam, limit: q.n, remaining: pos,
		retryUS: poll}}, a)
	d.QueueDepth, d.QueuePosition, d.Limit, d.Remaining = d.Limit, d.Remaining, 0, 0
	return &d
}

// Leave takes the request's ticket out of the team's waiting room.
func (l *Local) Leave(_ context.Context, team, requestID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := &l.team(team).queue
	if q.remove(requestID) && q.n > 0 {
		q.n--
	}
	return nil
}
