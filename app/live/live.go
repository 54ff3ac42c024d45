// Package live counts the gateway's traffic for the console's dashboard: per team
// and member, per UTC minute (in 10-second slots), the requests answered, 429s,
// 402s, other refusals, tokens and spend, with the requests in flight and when
// each member was last seen.
//
// Each replica counts in memory, on the request's goroutine and without I/O, and
// a loop (Run) adds its counts to Redis once a second in one pipeline, so readers
// on any replica see every replica's traffic within about a second. Without Redis
// the same API works in-process, for the single replica that has it.
//
// Keys, all under the team's hash tag so a team's keys share a Cluster slot:
//
//	<prefix>{t:<team>}:live:<unix minute>       hash, kept 2h (HINCRBY)
//	    m<member>.<slot>.<c>   a member's counter c in 10-second slot 0..5
//	    t.<c>                  the team's total for the minute (the chart)
//	<prefix>{t:<team>}:live:inflight:<replica>  hash member → requests in flight on
//	                                            that replica; it expires a few
//	                                            seconds after the replica's last
//	                                            flush, so a dead replica's counts vanish
//	<prefix>{t:<team>}:live:replicas            zset of replicas that flushed in-flight
//	                                            counts (score: unix ms), pruned after 1h
//	<prefix>{t:<team>}:live:seen                zset member → last seen (unix ms), ZADD GT
//
//	<prefix>{t:<team>}:live:refused:<member>    list of the member's latest refusals (refusals.go)
//
// Counters c: r requests, t 429s, b 402s, x other refusals, k tokens, s spend µ$.
// These are live figures, lost if Redis is; money that matters is in the ledger.
package live

import (
	"cmp"
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/proxy"
)

// Slots per minute: "the last minute" is the current 10-second slot and the five
// before it, so it covers 50 to 60 seconds and never drops to zero at :00.
const (
	slotsPerMinute = 6
	slotSeconds    = 60 / slotsPerMinute
)

// How long keys live. The minute hashes outlast the hour the chart shows.
const (
	minuteTTL   = 2 * time.Hour
	seenTTL     = 35 * 24 * time.Hour
	replicasTTL = time.Hour
)

// Options configure a Stats; zero values take the defaults noted.
type Options struct {
	// Prefix starts every Redis key: config REDIS_KEY_PREFIX.
	Prefix string
	// Replica names this process in its in-flight key; default a random id.
	Replica string
	// Interval is how often Run flushes to Redis; default 1s.
	Interval time.Duration
	// InFlightTTL is how long a replica's in-flight counts outlive its last flush;
	// default 5 × Interval.
	InFlightTTL time.Duration
	// Reuse is how long one read of a team's figures answers every caller on
	// this replica, so a team's open pages, each asking every second, cost one
	// read per Reuse whatever their number; default 0, every call reads.
	Reuse time.Duration
	// Timeout bounds each flush and each read; default 2s.
	Timeout time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
}

// Counts are one member's (or the team's) figures over some span.
type Counts struct {
	Requests    int64 // requests the gateway answered, refused or not
	Throttled   int64 // answered 429 (a rate, TPM or concurrency limit, or the upstream's)
	OverBudget  int64 // answered 402
	Refused     int64 // refused for another reason: cut off, revoked key, no route, bad body...
	Tokens      int64 // every token class the provider reported: input, cache, output
	SpendMicros int64 // the settled cost of the requests, in micro-dollars
	Waited      int64 // requests that waited for a turn: the fair waiting room, the provider account's capacity
	WaitMillis  int64 // their waits summed, in milliseconds (X-Tollgate-Queued-Ms)
}

func (c *Counts) add(o Counts) {
	c.Requests += o.Requests
	c.Throttled += o.Throttled
	c.OverBudget += o.OverBudget
	c.Refused += o.Refused
	c.Tokens += o.Tokens
	c.SpendMicros += o.SpendMicros
	c.Waited += o.Waited
	c.WaitMillis += o.WaitMillis
}

// counters names each field of Counts in Redis.
var counters = [...]struct {
	name string
	get  func(*Counts) *int64
}{
	{"r", func(c *Counts) *int64 { return &c.Requests }},
	{"t", func(c *Counts) *int64 { return &c.Throttled }},
	{"b", func(c *Counts) *int64 { return &c.OverBudget }},
	{"x", func(c *Counts) *int64 { return &c.Refused }},
	{"k", func(c *Counts) *int64 { return &c.Tokens }},
	{"s", func(c *Counts) *int64 { return &c.SpendMicros }},
	{"q", func(c *Counts) *int64 { return &c.Waited }},
	{"w", func(c *Counts) *int64 { return &c.WaitMillis }},
}

// Member is one member's live figures, summed over every replica.
type Member struct {
	LastMinute Counts    // the last 50 to 60 seconds
	InFlight   int64     // requests admitted and not yet answered
	LastSeen   time.Time // the end of their last request; zero if not seen in 35 days
}

// Minute is the team's totals for one UTC minute.
type Minute struct {
	Start time.Time
	Counts
}

// Team is a team's live figures, summed over every replica.
type Team struct {
	At         time.Time
	Members    map[int64]Member // members with any figure; others are all zero
	LastMinute Counts           // the team's last 50 to 60 seconds
	InFlight   int64
	Hour       []Minute // the last 60 minutes, oldest first, the current one last
}

type memberKey struct{ team, member int64 }

type slotKey struct {
	team, member, minute int64
	slot                 int8
}

// Stats counts live traffic; it is a proxy.Observer. Safe for concurrent use.
type Stats struct {
	rdb  redis.UniversalClient // nil: in-process only
	opts Options

	mu       sync.Mutex
	counts   map[slotKey]Counts      // with Redis: not yet flushed; without: the last 2h
	seen     map[memberKey]int64     // unix ms; with Redis: not yet flushed
	inflight map[memberKey]int64     // this replica's requests in flight
	dirty    map[int64]bool          // teams whose in-flight counts changed since the last flush
	refusals map[memberKey][]Refusal // newest first; with Redis: not yet flushed
	pruned   int64                   // the minute the in-process counts were last pruned
	failing  bool                    // the last flush failed (logged once until it recovers)

	viewsMu sync.Mutex
	views   map[int64]*view // per team, the figures last read (read.go)
}

var _ proxy.Observer = (*Stats)(nil)

// New returns a Stats on rdb, or in-process when rdb is nil. With Redis, start
// its loop with Run.
func New(rdb redis.UniversalClient, o Options) *Stats {
	o.Replica = cmp.Or(o.Replica, rand.Text()[:12])
	o.Interval = cmp.Or(o.Interval, time.Second)
	o.InFlightTTL = cmp.Or(o.InFlightTTL, 5*o.Interval)
	o.Timeout = cmp.Or(o.Timeout, 2*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Stats{rdb: rdb, opts: o, counts: map[slotKey]Counts{}, seen: map[memberKey]int64{},
		inflight: map[memberKey]int64{}, dirty: map[int64]bool{}, refusals: map[memberKey][]Refusal{}, views: map[int64]*view{}}
}

// Started counts a request admitted and on its way upstream.
func (s *Stats) Started(teamID, memberID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[memberKey{teamID, memberID}]++
	s.dirty[teamID] = true
}

// Finished counts a request the gateway answered. Requests whose key was not
// recognised have no team and are not counted here.
func (s *Stats) Finished(o proxy.Outcome) {
	if o.TeamID == 0 {
		return
	}
	var c Counts
	c.Requests = 1
	switch {
	case o.Status == 429:
		c.Throttled = 1
	case o.Status == 402:
		c.OverBudget = 1
	case o.Refusal != "":
		c.Refused = 1
	}
	u := o.Usage
	c.Tokens = u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens + u.OutputTokens
	c.SpendMicros = o.CostMicros
	if o.Queued > 0 {
		c.Waited, c.WaitMillis = 1, max(1, o.Queued.Milliseconds())
	}

	now := s.opts.Now()
	k := slotAt(o.TeamID, o.MemberID, now)
	mk := memberKey{o.TeamID, o.MemberID}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.Admitted {
		if s.inflight[mk]--; s.inflight[mk] < 0 {
			s.inflight[mk] = 0
		}
		s.dirty[o.TeamID] = true
	}
	sum := s.counts[k]
	sum.add(c)
	s.counts[k] = sum
	s.seen[mk] = max(s.seen[mk], now.UnixMilli())
	if o.Refusal != "" && !o.Admitted {
		s.keepRefusalLocked(mk, Refusal{At: now.UTC(), Status: o.Status, Code: o.Refusal, Model: o.Model, KeyID: o.KeyID,
			Route: o.RoutePrefix, HoldMicros: o.HeldMicros, BudgetRemaining: o.BudgetRemaining})
	}
	if s.rdb == nil && k.minute != s.pruned {
		s.pruneLocked(k.minute)
	}
}

func slotAt(team, member int64, t time.Time) slotKey {
	sec := t.Unix()
	return slotKey{team: team, member: member, minute: floorDiv(sec, 60), slot: int8(mod(sec, 60) / slotSeconds)}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// pruneLocked drops in-process counts older than the minute hashes would live.
func (s *Stats) pruneLocked(minute int64) {
	s.pruned = minute
	oldest := minute - int64(minuteTTL/time.Minute)
	for k := range s.counts {
		if k.minute < oldest {
			delete(s.counts, k)
		}
	}
	cutoff := s.opts.Now().Add(-seenTTL).UnixMilli()
	for k, ms := range s.seen {
		if ms < cutoff {
			delete(s.seen, k)
		}
	}
	for k, list := range s.refusals {
		if len(list) > 0 && s.opts.Now().Sub(list[0].At) > refusalsTTL {
			delete(s.refusals, k)
		}
	}
}

// Run flushes to Redis every Interval until ctx ends, then once more, so the
// last second's counts are not lost. Without Redis it only prunes old counts.
func (s *Stats) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if s.rdb != nil {
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
				_ = s.Flush(fctx)
				cancel()
			}
			return
		case <-t.C:
			if s.rdb == nil {
				s.mu.Lock()
				s.pruneLocked(floorDiv(s.opts.Now().Unix(), 60))
				s.mu.Unlock()
				continue
			}
			fctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
			_ = s.Flush(fctx)
			cancel()
		}
	}
}

// Replica is this process's id in the in-flight keys.
func (s *Stats) Replica() string { return s.opts.Replica }

func (s *Stats) key(team int64, rest string) string {
	return s.opts.Prefix + "{t:" + strconv.FormatInt(team, 10) + "}:live:" + rest
}

func (s *Stats) minuteKey(team, minute int64) string {
	return s.key(team, strconv.FormatInt(minute, 10))
}

func memberField(member int64, slot int8, counter string) string {
	return "m" + strconv.FormatInt(member, 10) + "." + strconv.Itoa(int(slot)) + "." + counter
}
