package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
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
	limits store.Limits
	budget views.Budget
	// teamOver is when the team's budget is used up, the end of its period
	// ("" for a total budget); nil while it is not.
	teamOver *string
	recent   []proxy.LedgerEntry
	keyNames map[string]string // the member's keys' names by id, to say which key made each request
}

func (c *Console) readMemberFigures(ctx context.Context, teamID, memberID int64) (memberFigures, error) {
	team, err := c.readTeamFigures(ctx, teamID)
	if err != nil {
		return memberFigures{}, err
	}
	f := memberFigures{at: team.at, limits: team.memberLimits(memberID), budget: team.memberBudget(memberID)}
	if tb := team.teamBudget(); tb.Over {
		f.teamOver = &tb.Resets
	}
	if f.recent, err = c.st.Ledger(ctx, teamID, &memberID, team.at.Add(-recentWindow), recentRequests); err != nil {
		return f, err
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
		Budget: figs.budget, Limits: describeLimits(figs.limits)}
	if own {
		vm.StreamURL = Prefix + "/usage/live"
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
	for _, e := range figs.recent {
		row := recentRow(e)
		row.KeyID, row.KeyName = e.KeyID, figs.keyNames[e.KeyID]
		vm.Recent = append(vm.Recent, row)
	}
	return vm
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
