package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refused requests never reach the ledger (nothing was held or charged), yet a
// member refused every time needs to see why, and so does their owner. Each
// member's latest refusals are kept here, newest first:
//
//	<prefix>{t:<team>}:live:refused:<member>  list of JSON Refusal, LPUSH + LTRIM
//	                                           to KeptRefusals, kept refusalsTTL

// KeptRefusals is how many of a member's latest refusals are kept.
const KeptRefusals = 20

const refusalsTTL = 30 * 24 * time.Hour

// Refusal is one request the gateway answered itself instead of forwarding it.
type Refusal struct {
	At     time.Time `json:"at"`
	Status int       `json:"status"` // what the caller got: 402, 429, 403, ...
	// Code names the control that refused (proxy.Outcome.Refusal): budget, rate,
	// member_disabled, revoked, no_route, bad_body, ...
	Code  string `json:"code"`
	Model string `json:"model,omitempty"`
	KeyID string `json:"key,omitempty"`
	Route string `json:"route,omitempty"`
	// HoldMicros is what the request would have held: on a 402, the most it
	// could cost, which the budget left could not cover. 0 when not estimated.
	HoldMicros int64 `json:"hold,omitempty"`
	// BudgetRemaining is the budget left when it was refused; -1 when no budget
	// was consulted.
	BudgetRemaining int64 `json:"left"`
}

// keepRefusal adds r to the member's pending refusals, newest first, dropping
// the oldest past KeptRefusals. Callers hold s.mu.
func (s *Stats) keepRefusalLocked(k memberKey, r Refusal) {
	list := append([]Refusal{r}, s.refusals[k]...)
	s.refusals[k] = list[:min(len(list), KeptRefusals)]
}

// writeRefusals pushes each member's pending refusals onto their list, oldest
// first so the list stays newest first, and trims it.
func (s *Stats) writeRefusals(ctx context.Context, p redis.Pipeliner, refusals map[memberKey][]Refusal) {
	for k, list := range refusals {
		key := s.refusalsKey(k.team, k.member)
		for _, r := range slices.Backward(list) {
			b, _ := json.Marshal(r)
			p.LPush(ctx, key, b)
		}
		p.LTrim(ctx, key, 0, KeptRefusals-1)
		p.PExpire(ctx, key, refusalsTTL)
	}
}

func (s *Stats) refusalsKey(team, member int64) string {
	return s.key(team, fmt.Sprintf("refused:%d", member))
}

// Refusals is a member's latest refusals on every replica, newest first: at
// most KeptRefusals, from the last 30 days. Refusals this replica has not
// flushed yet arrive within Interval.
func (s *Stats) Refusals(ctx context.Context, teamID, memberID int64) ([]Refusal, error) {
	if s.rdb == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Clone(s.refusals[memberKey{teamID, memberID}]), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	raw, err := s.rdb.LRange(ctx, s.refusalsKey(teamID, memberID), 0, KeptRefusals-1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("live: read refusals of member %d: %w", memberID, err)
	}
	out := make([]Refusal, 0, len(raw))
	for _, b := range raw {
		var r Refusal
		if json.Unmarshal([]byte(b), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}
