package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// Tier is a named preset of member limits as the API answers it.
type Tier struct {
	Name   string `json:"name" doc:"Lower-case letters, digits and dashes."`
	Limits Limits `json:"limits" doc:"The tier's member limits; a member's own limits win over them."`
	Weight int64  `json:"weight" doc:"Share under contention (for the fair waiting room)."`
	// The most a member of the tier is granted per budget period by auto-approved requests.
	AutoApproveMicros int64  `json:"auto_approve_micros" doc:"Budget requests are approved at once while a member's auto-approved grants this period stay within this; 0: never."`
	AutoApproveUSD    string `json:"auto_approve_usd" doc:"auto_approve_micros in dollars (25.00)."`
	OverBudget        string `json:"over_budget" enum:"refuse,fit" doc:"A request whose worst case does not fit the budget left: refuse it (402), or fit: lower its output cap (max_tokens, max_completion_tokens, max_output_tokens) to what is left, at least 1024 tokens, and forward it."`
	Members           int64  `json:"members" doc:"Members assigned (in listings)."`
}

func tierBody(t store.Tier) Tier {
	return Tier{Name: t.Name, Limits: limitsBody(t.Limits), Weight: t.Weight, AutoApproveMicros: t.AutoApprove,
		AutoApproveUSD: store.FormatDollars(t.AutoApprove), OverBudget: string(t.OverBudget), Members: t.Members}
}

// TierSettings are what a caller writes of a tier: its limits, weight,
// auto-approve ceiling (in micro-dollars or dollars) and what a request past
// the budget left gets. A PUT names them all,
// each limit included; a PATCH only what it changes.
type TierSettings struct {
	Limits            *LimitsInput `json:"limits,omitempty" doc:"The tier's member limits; a member's own limits win over them."`
	Weight            *int64       `json:"weight,omitempty" minimum:"1" maximum:"1000" doc:"Share under contention (for the fair waiting room)."`
	AutoApproveMicros *int64       `json:"auto_approve_micros,omitempty" minimum:"0" doc:"Budget requests are approved at once while a member's auto-approved grants this period stay within this; 0: never (or auto_approve_usd)."`
	AutoApproveUSD    *string      `json:"auto_approve_usd,omitempty" example:"10.00" doc:"auto_approve_micros in dollars (or auto_approve_micros)."`
	OverBudget        *string      `json:"over_budget,omitempty" enum:"refuse,fit" doc:"A request whose worst case does not fit the budget left: refuse (402), or fit: lower its output cap to what is left (at least 1024 tokens) and forward it. New tiers refuse."`
}

// tierFields are what a PUT of a tier must name besides its limits.
var tierFields = [][]string{{"limits"}, {"weight"}, {"auto_approve_micros", "auto_approve_usd"}, {"over_budget"}}

// change is what the settings the caller named (f) do to a stored tier.
func (in TierSettings) change(f fields) (func(store.Tier) store.Tier, error) {
	limits := func(l store.Limits) store.Limits { return l }
	if in.Limits != nil {
		var err error
		if limits, err = in.Limits.change(fieldsOf(f["limits"])); err != nil {
			return nil, store.Within("limits", err)
		}
	}
	var autoApprove *int64
	switch {
	case in.AutoApproveUSD != nil:
		v, err := store.ParseDollars(*in.AutoApproveUSD)
		if err != nil {
			return nil, &store.ValidationError{Field: "auto_approve_usd", Message: "auto_approve_usd: " + err.Error()}
		}
		if in.AutoApproveMicros != nil && *in.AutoApproveMicros != v {
			return nil, &store.ValidationError{Field: "auto_approve_usd", Message: "auto_approve_usd and auto_approve_micros name different amounts; give one"}
		}
		autoApprove = &v
	case in.AutoApproveMicros != nil:
		autoApprove = in.AutoApproveMicros
	}
	return func(t store.Tier) store.Tier {
		t.Limits = limits(t.Limits)
		if in.Weight != nil {
			t.Weight = *in.Weight
		}
		if autoApprove != nil {
			t.AutoApprove = *autoApprove
		}
		if in.OverBudget != nil {
			t.OverBudget = store.OverBudget(*in.OverBudget)
		}
		return t
	}, nil
}

// missing are the problems of a PUT of a tier that leaves something out.
func (in TierSettings) missing(f fields) *Problem {
	details := f.missing("body.", tierFields)
	if in.Limits != nil {
		details = append(details, fieldsOf(f["limits"]).missing("body.limits.", limitFields)...)
	}
	return missingProblem(details)
}

// NewTier is a tier as its creator describes it: what it leaves out is none
// (limits), 1 (weight) or 0 (auto-approve).
type NewTier struct {
	Name string `json:"name" pattern:"^[a-z0-9][a-z0-9-]{0,62}$" doc:"Lower-case letters, digits and dashes."`
	TierSettings
}

type tierOut struct{ Body Tier }

type tiersOut struct {
	Body struct {
		Tiers []Tier `json:"tiers"`
	}
}

// TierPath names a tier in a path.
type TierPath struct {
	Name string `path:"name" doc:"The tier's name."`
}

// RequestPath names a budget request in a path.
type RequestPath struct {
	ID int64 `path:"id" doc:"The budget request's id."`
}

type effectiveOut struct {
	Body struct {
		Tier    string `json:"tier" doc:"The member's tier; empty when none."`
		Own     Limits `json:"own" doc:"The member's own limits, which win over the tier's."`
		Limits  Limits `json:"limits" doc:"What binds: the tier's limits with the member's own on top, before grants."`
		Granted int64  `json:"granted_micros" doc:"What approved budget requests add to the budget in the current period."`
	}
}

type budgetRequestsOut struct {
	Body struct {
		Requests []store.BudgetRequest `json:"requests"`
	}
}

type budgetRequestOut struct{ Body store.BudgetRequest }

type decideIn struct {
	RequestPath
	Body struct {
		Note string `json:"note,omitempty" maxLength:"500" doc:"A word to the member."`
	}
}

func (a *API) registerTiers(h huma.API) {
	huma.Register(h, operation("listTiers", http.MethodGet, "/tiers", AccessRead, 200, "List the team's limit tiers"),
		func(ctx context.Context, _ *struct{}) (*tiersOut, error) {
			tiers, err := a.st.Tiers(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "tier")
			}
			out := &tiersOut{}
			out.Body.Tiers = make([]Tier, len(tiers))
			for i, t := range tiers {
				out.Body.Tiers[i] = tierBody(t)
			}
			return out, nil
		})
	huma.Register(h, creating(operation("createTier", http.MethodPost, "/tiers", AccessOwner, 201, "Make a limit tier")),
		func(ctx context.Context, in *struct {
			IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
			Body           NewTier
		}) (*tierOut, error) {
			change, err := in.Body.change(fieldsOf(rawBody(ctx)))
			var t store.Tier
			if err == nil {
				t, err = a.st.CreateTier(ctx, actorOf(ctx), teamOf(ctx), change(store.NewTier(in.Body.Name)))
			}
			if err != nil {
				return nil, a.fromStore(err, "tier "+in.Body.Name)
			}
			return &tierOut{Body: tierBody(t)}, nil
		})
	huma.Register(h, operation("getTier", http.MethodGet, "/tiers/{name}", AccessRead, 200, "Get a limit tier", 404),
		func(ctx context.Context, in *TierPath) (*tierOut, error) {
			t, err := a.st.FindTier(ctx, teamOf(ctx), in.Name)
			if err != nil {
				return nil, a.fromStore(err, "tier")
			}
			return &tierOut{Body: tierBody(t)}, nil
		})
	huma.Register(h, operation("setTier", http.MethodPut, "/tiers/{name}", AccessOwner, 200,
		"Replace a tier's limits, weight and auto-approve ceiling, every field required: every member in it has them at their next request", 404, 422),
		func(ctx context.Context, in *tierSettingsIn) (*tierOut, error) {
			f := fieldsOf(rawBody(ctx))
			if p := in.Body.missing(f); p != nil {
				return nil, p
			}
			return a.changeTier(ctx, in.Name, in.Body, f, func(store.Tier) store.Tier {
				return store.NewTier(in.Name) // every field is replaced
			})
		})
	huma.Register(h, operation("patchTier", http.MethodPatch, "/tiers/{name}", AccessOwner, 200,
		"Change some of a tier's settings: fields left out stay (in limits too), null removes a limit", 404, 422),
		func(ctx context.Context, in *tierSettingsIn) (*tierOut, error) {
			return a.changeTier(ctx, in.Name, in.Body, fieldsOf(rawBody(ctx)), func(t store.Tier) store.Tier { return t })
		})
	huma.Register(h, operation("deleteTier", http.MethodDelete, "/tiers/{name}", AccessOwner, 204,
		"Delete a tier no member is in", 404, 409),
		func(ctx context.Context, in *TierPath) (*struct{}, error) {
			if err := a.st.DeleteTier(ctx, actorOf(ctx), teamOf(ctx), in.Name); err != nil {
				return nil, a.fromStore(err, "tier")
			}
			return nil, nil
		})
	huma.Register(h, operation("setMemberTier", http.MethodPut, "/members/{id}/tier", AccessOwner, 200,
		"Put a member in a tier, or in none; their own limits stay and win over the tier's", 404, 422),
		func(ctx context.Context, in *struct {
			MemberPath
			Body struct {
				Tier string `json:"tier" doc:"The tier's name; empty: none."`
			}
		}) (*effectiveOut, error) {
			if _, err := a.st.AssignTier(ctx, actorOf(ctx), teamOf(ctx), in.ID, in.Body.Tier); err != nil {
				return nil, a.fromStore(err, "member or tier")
			}
			return a.effective(ctx, in.ID)
		})
	huma.Register(h, operation("getMemberEffectiveLimits", http.MethodGet, "/members/{id}/effective-limits", AccessRead, 200,
		"Get what binds a member: their tier's limits with their own on top, and this period's grants", 404),
		func(ctx context.Context, in *MemberPath) (*effectiveOut, error) {
			return a.effective(ctx, in.ID)
		})
	huma.Register(h, operation("listBudgetRequests", http.MethodGet, "/budget-requests", AccessRead, 200,
		"List the team's budget requests waiting for an answer, oldest first"),
		func(ctx context.Context, _ *struct{}) (*budgetRequestsOut, error) {
			reqs, err := a.st.PendingBudgetRequests(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "budget request")
			}
			out := &budgetRequestsOut{}
			out.Body.Requests = reqs
			return out, nil
		})
	for _, d := range []struct {
		id, path, summary string
		approve           bool
	}{
		{"approveBudgetRequest", "/budget-requests/{id}/approve",
			"Approve a budget request: the member's budget for the current period rises by exactly its amount", true},
		{"declineBudgetRequest", "/budget-requests/{id}/decline", "Decline a budget request; nothing else changes", false},
	} {
		huma.Register(h, operation(d.id, http.MethodPost, d.path, AccessOwner, 200, d.summary, 404, 409, 422),
			func(ctx context.Context, in *decideIn) (*budgetRequestOut, error) {
				decide := a.st.DeclineBudgetRequest
				if d.approve {
					decide = a.st.ApproveBudgetRequest
				}
				r, err := decide(ctx, actorOf(ctx), teamOf(ctx), in.ID, in.Body.Note)
				if err != nil {
					return nil, a.fromStore(err, "budget request")
				}
				return &budgetRequestOut{Body: r}, nil
			})
	}
}

type tierSettingsIn struct {
	TierPath
	Body TierSettings
}

// changeTier applies settings (named by f) to the tier as stored, after base.
func (a *API) changeTier(ctx context.Context, name string, settings TierSettings, f fields, base func(store.Tier) store.Tier) (*tierOut, error) {
	change, err := settings.change(f)
	if err != nil {
		return nil, a.fromStore(err, "tier")
	}
	t, err := a.st.ChangeTier(ctx, actorOf(ctx), teamOf(ctx), name, func(t store.Tier) store.Tier { return change(base(t)) })
	if err != nil {
		return nil, a.fromStore(err, "tier")
	}
	return &tierOut{Body: tierBody(t)}, nil
}

func (a *API) effective(ctx context.Context, memberID int64) (*effectiveOut, error) {
	e, err := a.st.EffectiveLimits(ctx, teamOf(ctx), memberID)
	if err != nil {
		return nil, a.fromStore(err, "member")
	}
	out := &effectiveOut{}
	out.Body.Tier, out.Body.Own, out.Body.Limits, out.Body.Granted = e.Tier, limitsBody(e.Own), limitsBody(e.Limits), e.Granted
	return out, nil
}
