package live

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// hourMinutes is how many minutes Team.Hour holds.
const hourMinutes = 60

// Team returns a team's live figures summed over every replica: two pipelined
// round trips to Redis, or this process's own counts without Redis. Counts this
// replica has not flushed yet are not included; they arrive within Interval.
func (s *Stats) Team(ctx context.Context, teamID int64) (Team, error) {
	now := s.opts.Now().UTC()
	if s.rdb == nil {
		return s.localTeam(teamID, now), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	minute := floorDiv(now.Unix(), 60)
	fields := make([]string, len(counters))
	for i, f := range counters {
		fields[i] = "t." + f.name
	}

	var (
		recent   [2]*redis.MapStringStringCmd // this minute and the one before
		hour     [hourMinutes]*redis.SliceCmd
		replicas *redis.StringSliceCmd
		seen     *redis.ZSliceCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		recent[0] = p.HGetAll(ctx, s.minuteKey(teamID, minute))
		recent[1] = p.HGetAll(ctx, s.minuteKey(teamID, minute-1))
		for i := range hour {
			hour[i] = p.HMGet(ctx, s.minuteKey(teamID, minute-hourMinutes+1+int64(i)), fields...)
		}
		replicas = p.ZRange(ctx, s.key(teamID, "replicas"), 0, -1)
		seen = p.ZRangeWithScores(ctx, s.key(teamID, "seen"), 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Team{}, fmt.Errorf("live: read team %d: %w", teamID, err)
	}

	t := Team{At: now, Members: map[int64]Member{}}
	for i, cmd := range recent {
		for field, v := range cmd.Val() {
			member, slot, counter, ok := parseMemberField(field)
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || !inLastMinute(minute-int64(i), slot, now) {
				continue
			}
			m := t.Members[member]
			for _, f := range counters {
				if f.name == counter {
					*f.get(&m.LastMinute) += n
					*f.get(&t.LastMinute) += n
				}
			}
			t.Members[member] = m
		}
	}
	for i, cmd := range hour {
		mt := Minute{Start: time.Unix((minute-hourMinutes+1+int64(i))*60, 0).UTC()}
		for j, v := range cmd.Val() {
			if str, ok := v.(string); ok {
				n, _ := strconv.ParseInt(str, 10, 64)
				*counters[j].get(&mt.Counts) = n
			}
		}
		t.Hour = append(t.Hour, mt)
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
			for field, v := range cmd.Val() {
				member, err1 := strconv.ParseInt(field, 10, 64)
				n, err2 := strconv.ParseInt(v, 10, 64)
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
