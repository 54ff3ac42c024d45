package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// Limits are a member's, the team's or a tier's limits as the API answers
// them: every field present, so what a GET answers can be PUT back as it is;
// a limit of none is null; money and the rate period in both units.
type Limits struct {
	RateAlgorithm   string  `json:"rate_algorithm" enum:"token_bucket,sliding_window"`
	RateLimit       *int64  `json:"rate_limit" nullable:"true" doc:"Requests per rate period; null: no rate limit."`
	RatePeriodMS    int64   `json:"rate_period_ms" doc:"The rate period in milliseconds."`
	RatePeriod      string  `json:"rate_period" doc:"The rate period as a duration (1s, 1m0s): the same as rate_period_ms."`
	RateBurst       *int64  `json:"rate_burst" nullable:"true" doc:"Token bucket capacity; null: rate_limit."`
	Concurrency     *int64  `json:"concurrency" nullable:"true" doc:"Requests in flight at once; null: no cap."`
	TokensPerMinute *int64  `json:"tokens_per_minute" nullable:"true" doc:"null: no token limit."`
	BudgetMicros    *int64  `json:"budget_micros" nullable:"true" doc:"Micro-dollars per budget_period; null: no budget, 0 refuses every paid request."`
	BudgetUSD       *string `json:"budget_usd" nullable:"true" doc:"The budget in dollars as a decimal string (25.00): the same as budget_micros."`
	BudgetPeriod    string  `json:"budget_period" enum:"total,daily,monthly" doc:"UTC periods."`
}

// LimitsInput is limits as a caller writes them. Each limit has one name and
// money and the period two spellings, either accepted: budget_micros or
// budget_usd, rate_period_ms or rate_period. A PUT names every limit; a PATCH
// only those it changes. null (or 0) sets no limit of that kind.
type LimitsInput struct {
	RateAlgorithm   *string `json:"rate_algorithm,omitempty" enum:"token_bucket,sliding_window"`
	RateLimit       *int64  `json:"rate_limit,omitempty" nullable:"true" minimum:"0" doc:"Requests per rate period; null or 0: no rate limit."`
	RatePeriodMS    *int64  `json:"rate_period_ms,omitempty" minimum:"1" doc:"The rate period in milliseconds (or rate_period)."`
	RatePeriod      *string `json:"rate_period,omitempty" example:"1m" doc:"The rate period as a Go duration: 1s, 1m, 1h30m (or rate_period_ms)."`
	RateBurst       *int64  `json:"rate_burst,omitempty" nullable:"true" minimum:"0" doc:"Token bucket capacity; null or 0: rate_limit."`
	Concurrency     *int64  `json:"concurrency,omitempty" nullable:"true" minimum:"0" doc:"Requests in flight at once; null or 0: no cap."`
	TokensPerMinute *int64  `json:"tokens_per_minute,omitempty" nullable:"true" minimum:"0" doc:"null or 0: no token limit."`
	BudgetMicros    *int64  `json:"budget_micros,omitempty" nullable:"true" minimum:"0" doc:"Micro-dollars per budget_period (or budget_usd); null: no budget, 0 refuses every paid request."`
	BudgetUSD       *string `json:"budget_usd,omitempty" nullable:"true" example:"25.00" doc:"Dollars per budget_period as a decimal string, exact to $0.000001 (or budget_micros); null: no budget."`
	BudgetPeriod    *string `json:"budget_period,omitempty" enum:"total,daily,monthly" doc:"UTC periods."`
}

// limitFields are the limits a PUT must name, each by any of its spellings.
var limitFields = [][]string{
	{"rate_algorithm"}, {"rate_limit"}, {"rate_period_ms", "rate_period"}, {"rate_burst"}, {"concurrency"},
	{"tokens_per_minute"}, {"budget_micros", "budget_usd"}, {"budget_period"},
}

// fields are the keys a JSON object names, each with its raw value: what
// tells a field left out (keep it) from a field set to null (no limit), which
// decode to the same nil.
type fields map[string]json.RawMessage

func fieldsOf(raw []byte) fields {
	var f fields
	_ = json.Unmarshal(raw, &f) // huma has refused a body that is not an object
	return f
}

func (f fields) null(name string) bool { return string(f[name]) == "null" }

// missing are the problems of a PUT that leaves out some of names' groups, at
// the location prefix gives ("body." or "body.limits."); a PUT replaces every
// limit, so one it does not name would be dropped without anyone asking.
func (f fields) missing(prefix string, groups [][]string) []ProblemDetail {
	var out []ProblemDetail
	for _, g := range groups {
		found := false
		for _, name := range g {
			_, ok := f[name]
			found = found || ok
		}
		if !found {
			msg := g[0] + " is required: a PUT replaces every field (null: no limit of that kind); PATCH changes only the fields it names"
			if len(g) > 1 {
				msg = g[0] + " (or " + strings.Join(g[1:], ", ") + ") is required: a PUT replaces every field (null: no limit of that kind); PATCH changes only the fields it names"
			}
			out = append(out, ProblemDetail{Location: prefix + g[0], Message: msg})
		}
	}
	return out
}

// missingProblem is a 422 naming every field a PUT left out, or nil.
func missingProblem(details []ProblemDetail) *Problem {
	if len(details) == 0 {
		return nil
	}
	names := make([]string, len(details))
	for i, d := range details {
		names[i] = strings.TrimPrefix(d.Location, "body.")
	}
	p := problem(http.StatusUnprocessableEntity, ProblemValidation, "missing "+strings.Join(names, ", ")+
		": a PUT replaces every field; send null for no limit, or PATCH to change only some")
	p.Errors = details
	return p
}

func limitsBody(l store.Limits) Limits {
	out := Limits{RateAlgorithm: l.RateAlgorithm, RatePeriodMS: l.RatePeriod.Milliseconds(), RatePeriod: l.RatePeriod.String(),
		RateLimit: orNone(l.RateLimit), RateBurst: orNone(l.RateBurst), Concurrency: orNone(l.Concurrency),
		TokensPerMinute: orNone(l.TokensPerMinute), BudgetMicros: l.Budget, BudgetPeriod: l.BudgetPeriod}
	if l.Budget != nil {
		usd := store.FormatDollars(*l.Budget)
		out.BudgetUSD = &usd
	}
	return out
}

// orNone is a limit as the API answers it: 0, none, is null.
func orNone(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// change is what the fields the caller named (f) do to a stored l: set from
// in, the rest left as they are. It is checked before it is applied, so the
// store can apply it to the limits as it holds them under its lock. A field
// named in both units must say the same thing in each.
func (in LimitsInput) change(f fields) (func(store.Limits) store.Limits, error) {
	for _, name := range []string{"rate_algorithm", "rate_period_ms", "rate_period", "budget_period"} {
		if f.null(name) {
			return nil, &store.ValidationError{Field: name, Message: name + " cannot be null: it is a setting, not a limit; leave it out to keep it"}
		}
	}
	period, err := in.period()
	if err != nil {
		return nil, err
	}
	_, micros := f["budget_micros"]
	_, usd := f["budget_usd"]
	var budget *int64
	if micros || usd {
		if budget, err = in.budget(f, micros, usd); err != nil {
			return nil, err
		}
	}
	return func(l store.Limits) store.Limits {
		for _, c := range []struct {
			name string
			dst  *int64
			v    *int64
		}{
			{"rate_limit", &l.RateLimit, in.RateLimit}, {"rate_burst", &l.RateBurst, in.RateBurst},
			{"concurrency", &l.Concurrency, in.Concurrency}, {"tokens_per_minute", &l.TokensPerMinute, in.TokensPerMinute},
		} {
			if _, ok := f[c.name]; ok {
				*c.dst = 0 // null: none
				if c.v != nil {
					*c.dst = *c.v
				}
			}
		}
		if in.RateAlgorithm != nil {
			l.RateAlgorithm = *in.RateAlgorithm
		}
		if in.BudgetPeriod != nil {
			l.BudgetPeriod = *in.BudgetPeriod
		}
		if period != nil {
			l.RatePeriod = *period
		}
		if micros || usd {
			l.Budget = budget
		}
		return l
	}, nil
}

// period is the rate period the input names, in whichever unit, or nil.
func (in LimitsInput) period() (*time.Duration, error) {
	var fromMS, fromDuration *time.Duration
	if in.RatePeriodMS != nil {
		d, err := store.RatePeriodMS(*in.RatePeriodMS)
		if err != nil {
			return nil, err
		}
		fromMS = &d
	}
	if in.RatePeriod != nil {
		d, err := time.ParseDuration(*in.RatePeriod)
		if err != nil || d%time.Millisecond != 0 {
			return nil, &store.ValidationError{Field: "rate_period",
				Message: fmt.Sprintf("rate_period must be a duration such as 1s, 1m or 1h30m, in whole milliseconds, not %q", *in.RatePeriod)}
		}
		if _, err := store.RatePeriodMS(d.Milliseconds()); err != nil {
			return nil, &store.ValidationError{Field: "rate_period",
				Message: fmt.Sprintf("rate_period must be from 1ms to 366 days (8784h), not %s", *in.RatePeriod)}
		}
		fromDuration = &d
	}
	if fromMS != nil && fromDuration != nil && *fromMS != *fromDuration {
		return nil, &store.ValidationError{Field: "rate_period",
			Message: fmt.Sprintf("rate_period (%s) and rate_period_ms (%d) name different periods; give one", *in.RatePeriod, *in.RatePeriodMS)}
	}
	if fromMS != nil {
		return fromMS, nil
	}
	return fromDuration, nil
}

// budget is the budget the input names, in whichever unit (nil: none).
func (in LimitsInput) budget(f fields, micros, usd bool) (*int64, error) {
	var fromUSD *int64
	if usd && !f.null("budget_usd") {
		v, err := store.ParseDollars(*in.BudgetUSD)
		if err != nil {
			return nil, &store.ValidationError{Field: "budget_usd", Message: "budget_usd: " + err.Error()}
		}
		fromUSD = &v
	}
	if !micros {
		return fromUSD, nil
	}
	fromMicros := in.BudgetMicros // nil when null
	if usd && !equalBudget(fromMicros, fromUSD) {
		return nil, &store.ValidationError{Field: "budget_usd",
			Message: "budget_usd and budget_micros name different budgets; give one"}
	}
	return fromMicros, nil
}

func equalBudget(a, b *int64) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// replace is a PUT's limits: every field named, or a 422 naming the missing.
func (in LimitsInput) replace(f fields) (store.Limits, error) {
	if p := missingProblem(f.missing("body.", limitFields)); p != nil {
		return store.Limits{}, p
	}
	change, err := in.change(f)
	if err != nil {
		return store.Limits{}, err
	}
	return change(store.NoLimits()), nil
}

type limitsOut struct{ Body Limits }

// limitsIn is a PUT or PATCH of limits; rawBody tells which fields it names.
type limitsIn struct {
	Body LimitsInput
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
		"Replace the team-wide limits and budget, which bind on top of each member's; every field is required", 422),
		func(ctx context.Context, in *limitsIn) (*limitsOut, error) {
			l, err := in.Body.replace(fieldsOf(rawBody(ctx)))
			if err == nil {
				l, err = a.st.SetTeamLimits(ctx, actorOf(ctx), teamOf(ctx), l)
			}
			return a.limitsAnswer(l, err, "team")
		})
	huma.Register(h, operation("patchTeamLimits", http.MethodPatch, "/limits", AccessOwner, 200,
		"Change some team-wide limits: fields left out stay, null removes a limit", 422),
		func(ctx context.Context, in *limitsIn) (*limitsOut, error) {
			change, err := in.Body.change(fieldsOf(rawBody(ctx)))
			var l store.Limits
			if err == nil {
				l, err = a.st.ChangeTeamLimits(ctx, actorOf(ctx), teamOf(ctx), change)
			}
			return a.limitsAnswer(l, err, "team")
		})
}

// limitsAnswer is the answer to a write of limits.
func (a *API) limitsAnswer(l store.Limits, err error, what string) (*limitsOut, error) {
	if p, ok := errors.AsType[*Problem](err); ok {
		return nil, p
	}
	if err != nil {
		return nil, a.fromStore(err, what)
	}
	return &limitsOut{Body: limitsBody(l)}, nil
}
