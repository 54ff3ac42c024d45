package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// The owners' dashboard: every member's live traffic, refusals and spend, the
// team's budget and the last hour, pushed again every second over SSE.

func (c *Console) showDashboard(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	figs, err := c.readTeamFigures(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	lt, ok := c.readLive(ctx, v.team.ID)
	checklist, err := c.checklist(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	requests, err := c.pendingRequests(r.Context(), v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.DashboardPage(views.Dashboard{Nav: nav(v, views.TabDashboard), Checklist: checklist,
		StreamURL: Prefix + "/dashboard/live", StaleAfter: c.staleAfter(), Live: dashboardLive(figs, lt, ok), Requests: requests}))
}

// streamDashboard pushes the dashboard's live part every StreamInterval.
func (c *Console) streamDashboard(w http.ResponseWriter, r *http.Request) {
	teamID := viewerFrom(r.Context()).team.ID
	var figs teamFigures
	// shown is the pending requests the page has, by id: the list is pushed
	// (out of band) at the stream's start, which may follow the page's render,
	// and then only when it changes, so a note being typed into one of its
	// forms is not wiped every second.
	shown := "\x00"
	c.stream(w, r, "dashboard", func(ctx context.Context) (templ.Component, error) {
		var requests []views.BudgetRequestRow
		changed := false
		if time.Since(figs.at) >= figuresRefresh {
			var err error
			if figs, err = c.readTeamFigures(ctx, teamID); err != nil {
				return nil, err
			}
			if requests, err = c.pendingRequests(ctx, teamID); err != nil {
				return nil, err
			}
			ids := ""
			for _, r := range requests {
				ids += r.ApproveURL + " "
			}
			changed, shown = ids != shown, ids
		}
		lt, ok := c.readLive(ctx, teamID)
		if changed {
			return views.DashboardLiveWithRequests(dashboardLive(figs, lt, ok), requests), nil
		}
		return views.DashboardLiveView(dashboardLive(figs, lt, ok)), nil
	})
}

func dashboardLive(figs teamFigures, lt live.Team, ok bool) views.DashboardLive {
	now := time.Now().UTC()
	vm := views.DashboardLive{Updated: now.Format("15:04:05") + " UTC", Connected: ok,
		Team: views.TeamSummary{Requests: count(lt.LastMinute.Requests, ok), Refused: count(refused(lt.LastMinute), ok),
			Throttled:  count(lt.LastMinute.Throttled, ok),
			OverBudget: count(lt.LastMinute.OverBudget, ok), InFlight: count(lt.InFlight, ok),
			Waited: waited(lt.LastMinute, ok), Spend: figs.teamBudget(), LimitsURL: Prefix + "/team/limits"}}
	for _, m := range figs.members {
		lm := lt.Members[m.ID]
		row := views.DashboardRow{ID: m.ID, Email: m.Email, URL: Prefix + "/members/" + strconv.FormatInt(m.ID, 10),
			Requests: count(lm.LastMinute.Requests, ok), Refused: count(refused(lm.LastMinute), ok), Throttled: count(lm.LastMinute.Throttled, ok),
			OverBudget: count(lm.LastMinute.OverBudget, ok), Tokens: count(lm.LastMinute.Tokens, ok),
			InFlight: count(lm.InFlight, ok), Waited: waited(lm.LastMinute, ok), Spend: figs.memberBudget(m.ID), LastSeen: lastSeen(lm.LastSeen, now, ok)}
		row.Status, row.StatusClass = memberState(m, row.Spend, lm)
		vm.Rows = append(vm.Rows, row)
	}
	minutes := make([]views.ChartMinute, len(lt.Hour))
	for i, m := range lt.Hour {
		minutes[i] = views.ChartMinute{Start: m.Start, SpendMicros: m.SpendMicros, Refused: refused(m.Counts)}
	}
	vm.Chart = views.NewChart(minutes, store.FormatDollars)
	return vm
}

// waited is how many of c's requests waited for a turn (the fair waiting room,
// the provider account's capacity), and their mean wait: "12 · 140 ms".
func waited(c live.Counts, ok bool) string {
	if !ok || c.Waited == 0 {
		return count(c.Waited, ok)
	}
	return count(c.Waited, ok) + " · " + strconv.FormatInt(c.WaitMillis/c.Waited, 10) + " ms"
}

// refused is every request of c the gateway did not answer with the
// upstream's success: 429s, 402s and the other refusals (403 cut off, 401
// revoked key, 503 no credential, ...).
func refused(c live.Counts) int64 { return c.Throttled + c.OverBudget + c.Refused }

// memberState is the dashboard's status badge: removed, cut off, over budget, budget
// too low (402s in the last minute, with budget left: one request may cost
// more than what is left), throttled (429s in the last minute), refused
// (other refusals in the last minute) or active.
func memberState(m store.Member, b views.Budget, lm live.Member) (label, class string) {
	switch {
	case m.Status == store.StatusRemoved:
		return "Removed", "disabled"
	case m.Status != store.StatusActive:
		return "Cut off", "disabled"
	case b.Over:
		return "Over budget", "disabled"
	case lm.LastMinute.OverBudget > 0:
		return "Budget too low", "disabled"
	case lm.LastMinute.Throttled > 0:
		return "Throttled", "grace"
	case lm.LastMinute.Refused > 0:
		return "Refused", "grace"
	}
	return "Active", "active"
}
