package limiter

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Spent reads what Redis counts as a team's spend in the current period of p,
// per member and for the team, in micro-dollars. It is for reconciling the
// counters with the ledger, not for the request path: it reads the whole team
// hash.
func (r *Redis) Spent(ctx context.Context, team string, p Period) (members map[string]int64, teamTotal int64, err error) {
	kind := p.kind()
	if kind == 0 {
		return nil, 0, fmt.Errorf("limiter: unknown period %q", p)
	}
	now, err := r.Now(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("limiter: read spend of team %s: %w", team, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	vals, err := r.client.HGetAll(ctx, r.teamBase(team)+"h").Result()
	if err != nil {
		return nil, 0, fmt.Errorf("limiter: read spend of team %s: %w", team, err)
	}
	index, _ := periodAt(kind, now.UnixMicro())
	field := "odm"[kind-1 : kind]
	members = map[string]int64{}
	for k, v := range vals {
		if len(v) != 16 {
			continue
		}
		// A field left from an earlier day or month counts nothing now.
		period := int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[:8]))))
		spent := int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8:]))))
		if kind != kindTotal && period != index {
			continue
		}
		if m, ok := strings.CutPrefix(k, field+":"); ok {
			members[m] = spent
		} else if k == field {
			teamTotal = spent
		}
	}
	return members, teamTotal, nil
}
