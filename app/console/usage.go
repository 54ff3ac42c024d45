package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/views"
)

// One member's usage: on their own page (live, over SSE) and on an owner's view
// of them. Only that member's figures are read into the view, never another's.

// recentRequests is how many ledger rows the usage section lists, from the
// last recentWindow.
const (
	recentRequests = 20
	recentWindow   = 30 * 24 * time.Hour
)

// memberFigures is what the usage section reads from Postgres about one member.
type memberFigures struct {
	at     time.Time
	limits store.Limits // the member's own, for the limits form
	// effective is what binds: the tier's limits with the member's own on
	// top, the budget raised by this period's grants.
	effective store.Limits
	budget    views.Budget
	// teamOver is when the team's budget is used up, the end of its period
	// ("" for a total budget); nil while it is not.
	teamOver *string
	recent   []proxy.LedgerEntry
	// refused is the member's latest refusals, which the ledger never sees.
	refused []live.Refusal
	// short says, per model the member used lately, that one request may cost
	// more than their budget has left, so every such request is refused (402).
	short    []string
	keyNames map[string]string // the member's keys' names by id, to say which key made each request
}

func (c *Console) readMemberFigures(ctx context.Context, teamID, memberID int64) (memberFigures, error) {
	team, err := c.readTeamFigures(ctx, teamID)
	if err != nil {
		return memberFigures{}, err
	}
	f := memberFigures{at: team.at, limits: team.memberLimits(memberID)}
	// The budget that binds is the tier's or the member's own, raised by this
	// period's grants; the limits form shows the member's own only.
	eff, err := c.st.EffectiveLimits(ctx, teamID, memberID)
	if err != nil {
		return memberFigures{}, err
	}
	period := eff.Limits.BudgetPeriod
	if eff.Limits.Budget == nil {
		period = string(limiter.PeriodMonthly)
	}
	if _, ok := team.spend[period]; !ok {
		if team.spend[period], err = c.st.SpendSince(ctx, teamID, store.PeriodStart(period, team.at)); err != nil {
			return memberFigures{}, err
		}
	}
	budget := eff.Budget()
	f.effective = eff.Limits
	f.effective.Budget = budget
	f.budget = budgetView(budget, period, team.spend[period][memberID], team.at)
	if tb := team.teamBudget(); tb.Over {
		f.teamOver = &tb.Resets
	}
	if f.recent, err = c.st.Ledger(ctx, teamID, &memberID, team.at.Add(-recentWindow), recentRequests); err != nil {
		return f, err
	}
	if c.live != nil {
		if f.refused, err = c.live.Refusals(ctx, teamID, memberID); err != nil {
			c.log.Debug("console: live refusals", "err", err)
			f.refused = nil
		}
	}
	if budget != nil {
		left := max(*budget-team.spend[period][memberID], 0)
		if f.short, err = c.shortfalls(ctx, left, f.budget.Resets, f.recent, f.refused); err != nil {
			return f, err
		}
	}
	keys, err := c.st.Keys(ctx, teamID)
	f.keyNames = map[string]string{}
	for _, k := range keys {
		if k.MemberID == memberID {
			f.keyNames[k.ID] = k.Name
		}
	}
	return f, err
}

// shortfallModels is how many of a member's recent models are checked
// against their budget.
const shortfallModels = 3

// shortfalls explains budgets that look fine but refuse every request: for each
// model the member used lately, newest first, if the most one request may cost
// (the hold the gateway places before forwarding) is more than left, a
// sentence saying so. The hold is the one the gateway placed on the member's
// last refused request when there is one, else the gateway's estimate
// (proxy/estimate) for a request that sets no max_tokens.
func (c *Console) shortfalls(ctx context.Context, left int64, resets string, recent []proxy.LedgerEntry, refused []live.Refusal) ([]string, error) {
	holds := map[string]int64{} // model → worst-case hold seen on a 402
	var models []string
	for _, r := range refused {
		if r.Model == "" {
			continue
		}
		if _, ok := holds[r.Model]; !ok {
			models = append(models, r.Model)
			holds[r.Model] = 0
		}
		if r.Status == http.StatusPaymentRequired && r.HoldMicros > 0 && holds[r.Model] == 0 {
			holds[r.Model] = r.HoldMicros
		}
	}
	for _, e := range recent {
		if _, ok := holds[e.Model]; !ok && e.Model != "" {
			models = append(models, e.Model)
			holds[e.Model] = 0
		}
	}
	until := "until the budget resets at " + resets
	if resets == "" {
		until = "until an owner raises the budget"
	}
	var out []string
	for _, model := range models[:min(len(models), shortfallModels)] {
		hold, how := holds[model], ""
		if hold == 0 {
			p, err := c.st.Price(ctx, model)
			if errors.Is(err, store.ErrNotFound) {
				continue // unpriced: not held, so never refused for its cost
			}
			if err != nil {
				return nil, err
			}
			hold, how = p.Estimate().Hold(1, p.MaxOutputTokens), " without max_tokens"
		}
		if hold > left {
			out = append(out, fmt.Sprintf("Requests on %s%s may cost up to %s; %s left, so the gateway refuses them (402) %s. "+
				"A smaller max_tokens holds less.", model, how, dollars(hold), dollars(left), until))
		}
	}
	return out, nil
}

// streamUsage pushes the viewer's own usage every StreamInterval. It takes no
// member id: a member can only ever stream their own.
func (c *Console) streamUsage(w http.ResponseWriter, r *http.Request) {
	v := viewerFrom(r.Context())
	teamID, memberID := v.team.ID, v.member.ID
	var figs memberFigures
	c.stream(w, r, "usage", func(ctx context.Context) (templ.Component, error) {
		if time.Since(figs.at) >= figuresRefresh {
			var err error
			if figs, err = c.readMemberFigures(ctx, teamID, memberID); err != nil {
				return nil, err
			}
		}
		return views.UsageSection(c.usageView(ctx, teamID, memberID, figs, true)), nil
	})
}

// usageView is member memberID's usage section; own is the viewer's own page,
// which is live.
func (c *Console) usageView(ctx context.Context, teamID, memberID int64, figs memberFigures, own bool) views.Usage {
	now := time.Now().UTC()
	lt, ok := c.readLive(ctx, teamID)
	lm := lt.Members[memberID]
	lt = live.Team{} // nothing of the other members goes further
	vm := views.Usage{Own: own, Connected: ok, Updated: now.Format("15:04:05") + " UTC",
		Requests: count(lm.LastMinute.Requests, ok), Throttled: count(lm.LastMinute.Throttled, ok),
		OverBudget: count(lm.LastMinute.OverBudget, ok), Refused: count(lm.LastMinute.Refused, ok),
		Tokens: count(lm.LastMinute.Tokens, ok), InFlight: count(lm.InFlight, ok), LastSeen: lastSeen(lm.LastSeen, now, ok),
		Budget: figs.budget, Limits: describeLimits(figs.effective)}
	if own {
		vm.StreamURL, vm.StaleAfter = Prefix+"/usage/live", c.staleAfter()
	} else {
		vm.Limits = nil // an owner's view has the limits form instead
	}
	if figs.teamOver != nil {
		vm.TeamBudget = "The team's budget is used up: paid requests are refused for everyone"
		if *figs.teamOver != "" {
			vm.TeamBudget += " until " + *figs.teamOver
		}
		vm.TeamBudget += "."
	}
	vm.Shortfalls = figs.short
	vm.Budget.Short = len(figs.short) > 0
	vm.Recent = recentRows(figs.recent, figs.refused, figs.keyNames)
	return vm
}

// recentRows merges ledger rows and refusals, newest first, at most
// recentRequests of them; keyNames names the keys of the ledger's rows.
func recentRows(ledger []proxy.LedgerEntry, refused []live.Refusal, keyNames map[string]string) []views.RecentRequest {
	type dated struct {
		at  time.Time
		row views.RecentRequest
	}
	var all []dated
	for _, e := range ledger {
		row := recentRow(e)
		row.KeyID, row.KeyName = e.KeyID, keyNames[e.KeyID]
		all = append(all, dated{e.CreatedAt, row})
	}
	for _, r := range refused {
		all = append(all, dated{r.At, refusalRow(r)})
	}
	slices.SortStableFunc(all, func(a, b dated) int { return b.at.Compare(a.at) })
	var rows []views.RecentRequest
	for _, d := range all[:min(len(all), recentRequests)] {
		rows = append(rows, d.row)
	}
	return rows
}

// refusalRow is a refused request: nothing was forwarded or charged.
func refusalRow(r live.Refusal) views.RecentRequest {
	row := views.RecentRequest{At: r.At.UTC().Format("Jan 2 15:04:05"), Model: cmp.Or(r.Model, "—"), Input: "—", Output: "—",
		CacheWrite: "—", CacheRead: "—", Cost: "$0", Status: strconv.Itoa(r.Status) + " refused: " + refusalWords(r.Code),
		StatusClass: "revoked"}
	if r.HoldMicros > 0 {
		row.Cost = "$0 (needed " + dollars(r.HoldMicros) + ")"
	}
	return row
}

// refusalWords names the control that refused a request.
func refusalWords(code string) string {
	switch code {
	case "budget":
		return "budget"
	case "rate":
		return "rate limit"
	case "tpm":
		return "tokens per minute"
	case "concurrency", "member_in_flight":
		return "too many in flight"
	case "cut_off":
		return "cut off"
	case "revoked":
		return "key revoked"
	case "expired":
		return "key expired"
	case "no_route":
		return "no such route"
	case "no_credential":
		return "no provider credential"
	case "route_disabled":
		return "route disabled"
	case "bad_body", "bad_request":
		return "bad request"
	}
	return "gateway unavailable"
}

func recentRow(e proxy.LedgerEntry) views.RecentRequest {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	row := views.RecentRequest{At: e.CreatedAt.UTC().Format("Jan 2 15:04:05"), Model: e.Model,
		Input: itoa(e.Usage.InputTokens), Output: itoa(e.Usage.OutputTokens), CacheWrite: itoa(e.Usage.CacheWriteTokens),
		CacheRead: itoa(e.Usage.CacheReadTokens), Cost: dollars(e.CostMicros), Status: string(e.Status)}
	if e.Status == proxy.LedgerHeld {
		row.Cost, row.Status = dollars(e.HeldMicros)+" held", "in flight"
	}
	if e.HTTPStatus != 0 {
		row.Status = strconv.Itoa(e.HTTPStatus) + " " + row.Status
	}
	switch e.Status {
	case proxy.LedgerSettled:
		row.StatusClass = "active"
	case proxy.LedgerReleased:
		row.StatusClass = "revoked"
	default:
		row.StatusClass = "grace"
	}
	if e.HTTPStatus >= 400 {
		row.StatusClass = "revoked"
	}
	return row
}

// memberUsage is a member's figures on the members page: the last minute
// ("—" when live figures are missing) and spend this period.
func memberUsage(figs teamFigures, lt live.Team, ok bool, id int64) *views.MemberUsage {
	lm := lt.Members[id]
	b := figs.memberBudget(id)
	spend := b.Spent
	if b.Limit != "" {
		spend += " of " + b.Limit
	}
	return &views.MemberUsage{Requests: count(lm.LastMinute.Requests, ok), Throttled: count(lm.LastMinute.Throttled, ok),
		Spend: spend}
}
