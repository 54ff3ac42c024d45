package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

type pricesOut struct {
	Body struct {
		Prices []store.Price `json:"prices"`
	}
}

// PriceSpec is a model's list price in micro-dollars per million tokens
// ($3/MTok is 3000000); the tier fields apply past tier_threshold_tokens.
type PriceSpec struct {
	Provider                string `json:"provider,omitempty" doc:"Absent: guessed from the model name."`
	InputPerMTok            int64  `json:"input_micros_per_mtok" minimum:"0"`
	OutputPerMTok           int64  `json:"output_micros_per_mtok" minimum:"0"`
	CacheWritePerMTok       int64  `json:"cache_write_micros_per_mtok,omitempty" minimum:"0"`
	CacheWrite1hPerMTok     int64  `json:"cache_write_1h_micros_per_mtok,omitempty" minimum:"0"`
	CacheReadPerMTok        int64  `json:"cache_read_micros_per_mtok,omitempty" minimum:"0"`
	MaxOutputTokens         int64  `json:"max_output_tokens" minimum:"1"`
	TierThreshold           int64  `json:"tier_threshold_tokens,omitempty" minimum:"0"`
	TierInputPerMTok        int64  `json:"tier_input_micros_per_mtok,omitempty" minimum:"0"`
	TierOutputPerMTok       int64  `json:"tier_output_micros_per_mtok,omitempty" minimum:"0"`
	TierCacheWritePerMTok   int64  `json:"tier_cache_write_micros_per_mtok,omitempty" minimum:"0"`
	TierCacheWrite1hPerMTok int64  `json:"tier_cache_write_1h_micros_per_mtok,omitempty" minimum:"0"`
	TierCacheReadPerMTok    int64  `json:"tier_cache_read_micros_per_mtok,omitempty" minimum:"0"`
	TakenOn                 string `json:"taken_on,omitempty" format:"date" doc:"The day the list price was taken; absent: today."`
}

func (a *API) registerPrices(h huma.API) {
	huma.Register(h, operation("listPrices", http.MethodGet, "/prices", AccessAnyToken, 200, "List the global price list"),
		func(ctx context.Context, _ *struct{}) (*pricesOut, error) {
			prices, err := a.st.Prices(ctx)
			if err != nil {
				return nil, a.fromStore(err, "price")
			}
			out := &pricesOut{}
			out.Body.Prices = prices
			return out, nil
		})
	huma.Register(h, operation("setPrice", http.MethodPut, "/prices/{model}", AccessDeployment, 200,
		"Create or replace a model's price (deployment token only: the price list is every team's)", 422),
		func(ctx context.Context, in *struct {
			Model string `path:"model" example:"claude-sonnet-4-5"`
			Body  PriceSpec
		}) (*struct{ Body store.Price }, error) {
			b := in.Body
			p := store.Price{Model: in.Model, Provider: b.Provider, InputPerMTok: b.InputPerMTok, OutputPerMTok: b.OutputPerMTok,
				CacheWritePerMTok: b.CacheWritePerMTok, CacheWrite1hPerMTok: b.CacheWrite1hPerMTok, CacheReadPerMTok: b.CacheReadPerMTok,
				MaxOutputTokens: b.MaxOutputTokens, TierThreshold: b.TierThreshold, TierInputPerMTok: b.TierInputPerMTok,
				TierOutputPerMTok: b.TierOutputPerMTok, TierCacheWritePerMTok: b.TierCacheWritePerMTok,
				TierCacheWrite1hPerMTok: b.TierCacheWrite1hPerMTok, TierCacheReadPerMTok: b.TierCacheReadPerMTok}
			if b.TakenOn != "" {
				day, err := time.Parse(time.DateOnly, b.TakenOn)
				if err != nil {
					return nil, problem(http.StatusUnprocessableEntity, ProblemValidation, "taken_on must be a date, YYYY-MM-DD")
				}
				p.TakenOn = day
			}
			saved, err := a.st.SetPrice(ctx, actorOf(ctx), p)
			if err != nil {
				return nil, a.fromStoreAt(err, "price", priceLocation)
			}
			return &struct{ Body store.Price }{Body: saved}, nil
		})
}

// priceLocation is where setPrice takes a field the store names: the model in
// the path, the rates with their unit (input is input_micros_per_mtok).
func priceLocation(field string) string {
	switch field {
	case "model":
		return "path.model"
	case "provider", "max_output_tokens":
		return "body." + field
	case "tier_threshold":
		return "body.tier_threshold_tokens"
	case "price":
		return "body"
	}
	return "body." + field + "_micros_per_mtok"
}
