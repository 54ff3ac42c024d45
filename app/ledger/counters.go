package ledger

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

// RedisUnread is CompareCounters' failure to read Redis, as opposed to Postgres.
type RedisUnread struct{ Err error }

func (e RedisUnread) Error() string { return e.Err.Error() }

// CompareCounters compares, for every budget of team t and its members, the
// spend Redis counts in the current period with the ledger's, and describes
// each difference. Run it while the team is idle: a request in flight is held,
// not yet spent, on both sides differently. An error reading Redis is a
// RedisUnread.
func CompareCounters(ctx context.Context, st *store.Store, r *limiter.Redis, t store.Team) ([]string, error) {
	// The period Redis counts is the one on its clock, not this machine's.
	now, err := r.Now(ctx)
	if err != nil {
		return nil, RedisUnread{err}
	}
	type side struct {
		redis  map[string]int64
		team   int64
		ledger map[int64]int64
	}
	periods := map[limiter.Period]*side{}
	load := func(p limiter.Period) (*side, error) {
		if s, ok := periods[p]; ok {
			return s, nil
		}
		s := &side{}
		var err error
		if s.redis, s.team, err = r.Spent(ctx, strconv.FormatInt(t.ID, 10), p); err != nil {
			return nil, RedisUnread{err}
		}
		if s.ledger, err = st.SpendSince(ctx, t.ID, store.PeriodStart(string(p), now)); err != nil {
			return nil, err
		}
		periods[p] = s
		return s, nil
	}
	var problems []string
	members, err := st.Members(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		// The budget that binds may be the member's tier's, with its period.
		e, err := st.EffectiveLimits(ctx, t.ID, m.ID)
		l := e.Limits
		if err != nil || l.Budget == nil {
			continue
		}
		s, err := load(limiter.Period(l.BudgetPeriod))
		if err != nil {
			return nil, err
		}
		if got, want := s.redis[strconv.FormatInt(m.ID, 10)], s.ledger[m.ID]; got != want {
			problems = append(problems, fmt.Sprintf("member %s: Redis counts %d µ$ this %s period, the ledger %d µ$", m.Email, got, l.BudgetPeriod, want))
		}
	}
	if l, err := st.TeamLimits(ctx, t.ID); err == nil && l.Budget != nil {
		s, err := load(limiter.Period(l.BudgetPeriod))
		if err != nil {
			return nil, err
		}
		var want int64
		for _, v := range s.ledger {
			want += v
		}
		if s.team != want {
			problems = append(problems, fmt.Sprintf("team %s: Redis counts %d µ$ this %s period, the ledger %d µ$", t.Name, s.team, l.BudgetPeriod, want))
		}
	}
	return problems, nil
}
