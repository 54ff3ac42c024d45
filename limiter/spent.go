package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Spent reads what Redis counts as a team's spend in the current period of p,
// per member and for the team, in micro-dollars. It is for reconciling the
// counters with the ledger, not for the request path.
func (r *Redis) Spent(ctx context.Context, team string, p Period) (members map[string]int64, teamTotal int64, err error) {
	if p.kind() == 0 {
		return nil, 0, fmt.Errorf("limiter: unknown period %q", p)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	vals, err := r.client.HGetAll(ctx, r.teamBase(team)+"spend:"+string(p)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("limiter: read spend of team %s: %w", team, err)
	}
	members = map[string]int64{}
	if p != PeriodTotal {
		// A hash left from an earlier day or month counts nothing now.
		index, _ := periodAt(p.kind(), r.clock().UnixMicro())
		if vals["p"] != strconv.FormatInt(index, 10) {
			return members, 0, nil
		}
	}
	for k, v := range vals {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		if m, ok := strings.CutPrefix(k, "m:"); ok {
			members[m] = n
		} else if k == "t" {
			teamTotal = n
		}
	}
	return members, teamTotal, nil
}
