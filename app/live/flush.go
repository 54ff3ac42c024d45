package live

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Flush adds the counts since the last flush to Redis and rewrites this
// replica's in-flight counts, in one pipeline. When it fails the counts are kept
// for the next flush (a pipeline cut half-way may then count some twice: these
// are live figures, not the ledger). Without Redis it does nothing.
func (s *Stats) Flush(ctx context.Context) error {
	if s.rdb == nil {
		return nil
	}
	now := s.opts.Now()
	s.mu.Lock()
	counts, seen, refusals := s.counts, s.seen, s.refusals
	s.counts, s.seen, s.refusals = map[slotKey]Counts{}, map[memberKey]int64{}, map[memberKey][]Refusal{}
	inflight := map[int64]map[int64]int64{} // team → member → requests in flight
	for k, n := range s.inflight {
		if s.dirty[k.team] || n > 0 {
			if inflight[k.team] == nil {
				inflight[k.team] = map[int64]int64{}
			}
			inflight[k.team][k.member] = n
		}
	}
	dirty := s.dirty
	s.dirty = map[int64]bool{}
	s.mu.Unlock()
	if len(counts) == 0 && len(seen) == 0 && len(inflight) == 0 && len(refusals) == 0 {
		return nil
	}

	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		s.writeCounts(ctx, p, counts)
		s.writeSeen(ctx, p, seen)
		s.writeInFlight(ctx, p, inflight, now)
		s.writeRefusals(ctx, p, refusals)
		return nil
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.restoreLocked(counts, seen, dirty, now)
		for k, older := range refusals {
			list := append(s.refusals[k], older...)
			s.refusals[k] = list[:min(len(list), KeptRefusals)]
		}
		if !s.failing {
			s.opts.Logger.Warn("live: flush to Redis failed; the dashboard lags until it recovers", "err", err)
		}
		s.failing = true
		return fmt.Errorf("live: flush: %w", err)
	}
	if s.failing {
		s.opts.Logger.Info("live: flushing to Redis again")
		s.failing = false
	}
	// Members whose last request ended are written as gone; stop tracking them.
	for team, members := range inflight {
		for member, n := range members {
			k := memberKey{team, member}
			if n == 0 && s.inflight[k] == 0 {
				delete(s.inflight, k)
			}
		}
	}
	return nil
}

// writeCounts adds each slot's counters to its minute hash, and the team's
// totals per minute for the chart.
func (s *Stats) writeCounts(ctx context.Context, p redis.Pipeliner, counts map[slotKey]Counts) {
	type teamMinute struct{ team, minute int64 }
	totals := map[teamMinute]Counts{}
	for k, c := range counts {
		key := s.minuteKey(k.team, k.minute)
		for _, f := range counters {
			if v := *f.get(&c); v != 0 {
				p.HIncrBy(ctx, key, memberField(k.member, k.slot, f.name), v)
			}
		}
		t := totals[teamMinute{k.team, k.minute}]
		t.add(c)
		totals[teamMinute{k.team, k.minute}] = t
	}
	for tm, c := range totals {
		key := s.minuteKey(tm.team, tm.minute)
		for _, f := range counters {
			if v := *f.get(&c); v != 0 {
				p.HIncrBy(ctx, key, "t."+f.name, v)
			}
		}
		p.PExpire(ctx, key, minuteTTL)
	}
}

func (s *Stats) writeSeen(ctx context.Context, p redis.Pipeliner, seen map[memberKey]int64) {
	byTeam := map[int64][]redis.Z{}
	for k, ms := range seen {
		byTeam[k.team] = append(byTeam[k.team], redis.Z{Score: float64(ms), Member: strconv.FormatInt(k.member, 10)})
	}
	for team, zs := range byTeam {
		key := s.key(team, "seen")
		// GT: a replica flushing an older time never moves a member back.
		p.ZAddGT(ctx, key, zs...)
		p.PExpire(ctx, key, seenTTL)
	}
}

// writeInFlight replaces this replica's in-flight hash of each team given: the
// members with requests in flight, refreshed so it outlives the next flush, or
// deleted when there are none.
func (s *Stats) writeInFlight(ctx context.Context, p redis.Pipeliner, inflight map[int64]map[int64]int64, now time.Time) {
	for team, members := range inflight {
		key := s.key(team, "inflight:"+s.opts.Replica)
		var set []any
		var gone []string
		for member, n := range members {
			if n > 0 {
				set = append(set, strconv.FormatInt(member, 10), n)
			} else {
				gone = append(gone, strconv.FormatInt(member, 10))
			}
		}
		if len(set) == 0 {
			p.Del(ctx, key)
			continue
		}
		p.HSet(ctx, key, set...)
		if len(gone) > 0 {
			p.HDel(ctx, key, gone...)
		}
		p.PExpire(ctx, key, s.opts.InFlightTTL)
		replicas := s.key(team, "replicas")
		p.ZAdd(ctx, replicas, redis.Z{Score: float64(now.UnixMilli()), Member: s.opts.Replica})
		p.ZRemRangeByScore(ctx, replicas, "-inf", strconv.FormatInt(now.Add(-replicasTTL).UnixMilli(), 10))
		p.PExpire(ctx, replicas, replicasTTL)
	}
}

// restoreLocked puts back what a failed flush did not write, dropping counts
// older than the chart shows.
func (s *Stats) restoreLocked(counts map[slotKey]Counts, seen map[memberKey]int64, dirty map[int64]bool, now time.Time) {
	oldest := floorDiv(now.Unix(), 60) - int64(minuteTTL/time.Minute)
	for k, c := range counts {
		if k.minute < oldest {
			continue
		}
		sum := s.counts[k]
		sum.add(c)
		s.counts[k] = sum
	}
	for k, ms := range seen {
		s.seen[k] = max(s.seen[k], ms)
	}
	for team := range dirty {
		s.dirty[team] = true
	}
}
