package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// Limits are a member's or the team's limits as the API spells them; a zero
// (or absent) limit is none of that kind.
type Limits struct {
	RateAlgorithm   string `json:"rate_algorithm,omitempty" enum:"token_bucket,sliding_window" default:"token_bucket"`
	RateLimit       int64  `json:"rate_limit,omitempty" minimum:"0" doc:"Requests per rate_period_ms; 0 or absent: no rate limit."`
	RatePeriodMS    int64  `json:"rate_period_ms,omitempty" minimum:"1" default:"1000"`
	RateBurst       int64  `json:"rate_burst,omitempty" minimum:"0" doc:"Token bucket capacity; 0: rate_limit."`
	Concurrency     int64  `json:"concurrency,omitempty" minimum:"0" doc:"Requests in flight at once."`
	TokensPerMinute int64  `json:"tokens_per_minute,omitempty" minimum:"0"`
	BudgetMicros    *int64 `json:"budget_micros,omitempty" minimum:"0" doc:"Micro-dollars per budget_period; absent: no budget, 0 refuses every paid request."`
	BudgetPeriod    string `json:"budget_period,omitempty" enum:"total,daily,monthly" default:"monthly" doc:"UTC periods."`
}

type limitsOut struct{ Body Limits }

func limitsBody(l store.Limits) Limits {
	return Limits{RateAlgorithm: l.RateAlgorithm, RateLimit: l.RateLimit, RatePeriodMS: l.RatePeriod.Milliseconds(),
		RateBurst: l.RateBurst, Concurrency: l.Concurrency, TokensPerMinute: l.TokensPerMinute, BudgetMicros: l.Budget,
		BudgetPeriod: l.BudgetPeriod}
}

// store is l as the store takes it; a period that no Duration holds is refused
// here (by the store's own bound), before it could wrap.
func (l Limits) store() (store.Limits, error) {
	period, err := store.RatePeriodMS(l.RatePeriodMS)
	return store.Limits{RateAlgorithm: l.RateAlgorithm, RateLimit: l.RateLimit, RatePeriod: period,
		RateBurst: l.RateBurst, Concurrency: l.Concurrency, TokensPerMinute: l.TokensPerMinute, Budget: l.BudgetMicros,
		BudgetPeriod: l.BudgetPeriod}, err
}

func (a *API) registerLimits(h huma.API) {
	huma.Register(h, operation("getTeamLimits", http.MethodGet, "/limits", AccessRead, 200, "Get the team-wide limits and budget"),
		func(ctx context.Context, _ *struct{}) (*limitsOut, error) {
			l, err := a.st.TeamLimits(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "team")
			}
			return &limitsOut{Body: limitsBody(l)}, nil
		})
	huma.Register(h, operation("setTeamLimits", http.MethodPut, "/limits", AccessOwner, 200,
		"Replace the team-wide limits and budget, which bind on top of each member's", 422),
		func(ctx context.Context, in *struct{ Body Limits }) (*limitsOut, error) {
			l, err := in.Body.store()
			if err == nil {
				l, err = a.st.SetTeamLimits(ctx, actorOf(ctx), teamOf(ctx), l)
			}
			if err != nil {
				return nil, a.fromStore(err, "team")
			}
			return &limitsOut{Body: limitsBody(l)}, nil
		})
}
