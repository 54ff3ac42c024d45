package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hourMinutes is how many minutes Team.Hour holds.
const hourMinutes = 60

// view is one team's figures as last read from Redis on this replica. Every
// caller within Options.Reuse shares one read, so a team's open pages cost one
// read per Reuse whatever their number; and the hour's older minutes, which
// flushes no longer touch, are read once and then carried along, so a read is
// the two newest minutes, the replicas, last-seen and the in-flight hashes.
type view struct {
	mu     sync.Mutex
	used   time.Time // last asked for, to drop views nobody reads
	read   time.Time // when team was read; zero until the first read
	fullAt time.Time // when the whole hour was last read
	team   Team
}

// Views nobody asked for in viewTTL are dropped. The whole hour is read again
// every fullHourEvery, which picks up counts a flush delayed by a Redis outage
// added to a minute older than the two newest.
const (
	viewTTL       = 10 * time.Minute
	fullHourEvery = 10 * time.Minute
)

// Team returns a team's live figures summed over every replica: one or two
// pipelined round trips to Redis, or this process's own counts without Redis.
// Counts this replica has not flushed yet are not included; they arrive within
// Interval (plus Reuse). The Team returned is the caller's own.
func (s *Stats) Team(ctx context.Context, teamID int64) (Team, error) {
	now := s.opts.Now().UTC()
	if s.rdb == nil {
		return s.localTeam(teamID, now), nil
	}
	v := s.view(teamID)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.read.IsZero() && time.Since(v.read) < s.opts.Reuse {
		return v.team.clone(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	t, err := s.readTeam(ctx, teamID, now, v)
	if err != nil {
		return Team{}, err
	}
	v.team, v.read = t, time.Now()
	return t.clone(), nil
}

// view is teamID's view, made on first use; views unused for viewTTL go.
func (s *Stats) view(teamID int64) *view {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	now := time.Now()
	for id, v := range s.views {
		if now.Sub(v.used) > viewTTL {
			delete(s.views, id)
		}
	}
	v := s.views[teamID]
	if v == nil {
		v = &view{}
		s.views[teamID] = v
	}
	v.used = now
	return v
}

// readTeam reads the team's figures, the hour's older minutes from v when v
// holds them (v.mu held).
func (s *Stats) readTeam(ctx context.Context, teamID int64, now time.Time, v *view) (Team, error) {
	minute := floorDiv(now.Unix(), 60)
	first := minute - hourMinutes + 1
	t := Team{At: now, Members: map[int64]Member{}, Hour: make([]Minute, hourMinutes)}
	for i := range t.Hour {
		t.Hour[i].Start = time.Unix((first+int64(i))*60, 0).UTC()
	}
	// Carry the older minutes over when the last read was this minute or the
	// one before: its two newest minutes were read then, so none is missing.
	var last int64
	if n := len(v.team.Hour); n > 0 {
		last = v.team.Hour[n-1].Start.Unix() / 60
	}
	full := v.read.IsZero() || time.Since(v.fullAt) >= fullHourEvery || last < minute-1 || last > minute
	if !full {
		for _, m := range v.team.Hour {
			if at := m.Start.Unix() / 60; at >= first && at < minute-1 {
				t.Hour[at-first] = m
			}
		}
	}
	fields := make([]string, len(counters))
	for i, f := range counters {
		fields[i] = "t." + f.name
	}

	var (
		recent   [2]*redis.MapStringStringCmd // this minute and the one before
		older    []*redis.SliceCmd            // the minutes before those, on a full read
		replicas *redis.StringSliceCmd
		seen     *redis.ZSliceCmd
	)
	// A replica's in-flight hash outlives its last ZADD here by InFlightTTL;
	// replicas older than that (with a minute to spare for clocks that
	// disagree) have none left to read.
	since := now.Add(-s.opts.InFlightTTL - time.Minute).UnixMilli()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		recent[0] = p.HGetAll(ctx, s.minuteKey(teamID, minute))
		recent[1] = p.HGetAll(ctx, s.minuteKey(teamID, minute-1))
		if full {
			for m := first; m < minute-1; m++ {
				older = append(older, p.HMGet(ctx, s.minuteKey(teamID, m), fields...))
			}
		}
		replicas = p.ZRangeByScore(ctx, s.key(teamID, "replicas"), &redis.ZRangeBy{Min: strconv.FormatInt(since, 10), Max: "+inf"})
		seen = p.ZRangeWithScores(ctx, s.key(teamID, "seen"), 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Team{}, fmt.Errorf("live: read team %d: %w", teamID, err)
	}

	for i, cmd := range recent {
		hm := &t.Hour[hourMinutes-1-i].Counts
		for field, val := range cmd.Val() {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				continue
			}
			if name, ok := strings.CutPrefix(field, "t."); ok {
				if c := counterNamed(name); c != nil {
					*c.get(hm) = n
				}
				continue
			}
			member, slot, counter, ok := parseMemberField(field)
			c := counterNamed(counter)
			if !ok || c == nil || !inLastMinute(minute-int64(i), slot, now) {
				continue
			}
			m := t.Members[member]
			*c.get(&m.LastMinute) += n
			*c.get(&t.LastMinute) += n
			t.Members[member] = m
		}
	}
	for i, cmd := range older {
		for j, val := range cmd.Val() {
			if str, ok := val.(string); ok {
				n, _ := strconv.ParseInt(str, 10, 64)
				*counters[j].get(&t.Hour[i].Counts) = n
			}
		}
	}
	if full {
		v.fullAt = time.Now()
	}
	for _, z := range seen.Val() {
		member, err := strconv.ParseInt(fmt.Sprint(z.Member), 10, 64)
		if err != nil {
			continue
		}
		m := t.Members[member]
		m.LastSeen = time.UnixMilli(int64(z.Score)).UTC()
		t.Members[member] = m
	}

	if len(replicas.Val()) > 0 {
		var inflight []*redis.MapStringStringCmd
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, r := range replicas.Val() {
				inflight = append(inflight, p.HGetAll(ctx, s.key(teamID, "inflight:"+r)))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return Team{}, fmt.Errorf("live: read team %d in flight: %w", teamID, err)
		}
		for _, cmd := range inflight {
			for field, val := range cmd.Val() {
				member, err1 := strconv.ParseInt(field, 10, 64)
				n, err2 := strconv.ParseInt(val, 10, 64)
				if err1 != nil || err2 != nil || n <= 0 {
					continue
				}
				m := t.Members[member]
				m.InFlight += n
				t.Members[member] = m
				t.InFlight += n
			}
		}
	}
	return t, nil
}

// counterNamed is the counter called name, or nil.
func counterNamed(name string) *struct {
	name string
	get  func(*Counts) *int64
} {
	for i := range counters {
		if counters[i].name == name {
			return &counters[i]
		}
	}
	return nil
}

// clone is t with maps and slices of its own, for a caller to keep.
func (t Team) clone() Team {
	t.Members = maps.Clone(t.Members)
	t.Hour = slices.Clone(t.Hour)
	return t
}

// parseMemberField reads "m<member>.<slot>.<counter>".
func parseMemberField(f string) (member int64, slot int8, counter string, ok bool) {
	rest, found := strings.CutPrefix(f, "m")
	if !found {
		return 0, 0, "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return 0, 0, "", false
	}
	member, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return 0, 0, "", false
	}
	sl, err := strconv.Atoi(parts[1])
	if err != nil || sl < 0 || sl >= slotsPerMinute {
		return 0, 0, "", false
	}
	return member, int8(sl), parts[2], true
}

// inLastMinute reports whether slot of minute is one of the six slots ending
// with the one now is in.
func inLastMinute(minute int64, slot int8, now time.Time) bool {
	cur := slotAt(0, 0, now)
	switch minute {
	case cur.minute:
		return slot <= cur.slot
	case cur.minute - 1:
		return slot > cur.slot
	}
	return false
}

// localTeam is Team from this process's own counts.
func (s *Stats) localTeam(teamID int64, now time.Time) Team {
	minute := floorDiv(now.Unix(), 60)
	first := minute - hourMinutes + 1
	t := Team{At: now, Members: map[int64]Member{}, Hour: make([]Minute, hourMinutes)}
	for i := range t.Hour {
		t.Hour[i].Start = time.Unix((first+int64(i))*60, 0).UTC()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.counts {
		if k.team != teamID {
			continue
		}
		if k.minute >= first && k.minute <= minute {
			t.Hour[k.minute-first].Counts.add(c)
		}
		if inLastMinute(k.minute, k.slot, now) {
			m := t.Members[k.member]
			m.LastMinute.add(c)
			t.Members[k.member] = m
			t.LastMinute.add(c)
		}
	}
	for k, ms := range s.seen {
		if k.team == teamID {
			m := t.Members[k.member]
			m.LastSeen = time.UnixMilli(ms).UTC()
			t.Members[k.member] = m
		}
	}
	for k, n := range s.inflight {
		if k.team == teamID && n > 0 {
			m := t.Members[k.member]
			m.InFlight += n
			t.Members[k.member] = m
			t.InFlight += n
		}
	}
	return t
}
