package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/views"
)

// Owners set each member's limits and the team's, through the same audited
// store functions as `tollgate admin set-limits`. Members have no such form and
// the routes are owner-only: a member cannot raise their own limits.

var limitFields = []string{"algorithm", "rate", "period", "burst", "tpm", "concurrency", "budget", "budget_period", "confirm"}

func (c *Console) setMemberLimits(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, limitFields...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := c.teamMember(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	back := memberURL(m.ID)
	save := func(l store.Limits) (store.Limits, error) {
		return c.st.SetMemberLimits(ctx, v.actor(), v.team.ID, m.ID, l)
	}
	refused := func(status int, f views.LimitsForm) {
		vm, err := c.memberPage(ctx, m, nil, "")
		if err != nil {
			c.fail(w, r, err)
			return
		}
		vm.Limits = f
		c.render(w, r, status, views.MemberPage(vm))
	}
	c.changeLimits(w, r, form, views.TabMembers, m.Email, back, save, refused)
}

func (c *Console) showTeamLimits(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l, err := c.st.TeamLimits(ctx, viewerFrom(ctx).team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.renderTeamLimits(w, r, http.StatusOK, limitsForm(l))
}

func (c *Console) renderTeamLimits(w http.ResponseWriter, r *http.Request, status int, f views.LimitsForm) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	figs, err := c.readTeamFigures(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	f.Team, f.Subject, f.Action = true, "the team "+v.team.Name, Prefix+"/team/limits"
	c.render(w, r, status, views.TeamLimitsPage(views.TeamLimits{Nav: nav(v, views.TabLimits), Spend: figs.teamBudget(), Form: f}))
}

func (c *Console) setTeamLimits(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, limitFields...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	save := func(l store.Limits) (store.Limits, error) { return c.st.SetTeamLimits(ctx, v.actor(), v.team.ID, l) }
	refused := func(status int, f views.LimitsForm) { c.renderTeamLimits(w, r, status, f) }
	c.changeLimits(w, r, form, views.TabLimits, "the team "+v.team.Name, Prefix+"/team/limits", save, refused)
}

// changeLimits is the flow both limits forms share: a form that does not parse
// or validate comes back with its message (422); without JavaScript a valid one
// is confirmed on a page first; then save writes it (audited). HTMX gets the
// form section back, marked saved; a plain form is redirected to back.
func (c *Console) changeLimits(w http.ResponseWriter, r *http.Request, form url.Values, tab, subject, back string,
	save func(store.Limits) (store.Limits, error), refused func(int, views.LimitsForm)) {
	posted := postedLimitsForm(form)
	posted.Action, posted.Subject = r.URL.Path, subject
	reject := func(msg string) {
		posted.Error = msg
		if isHTMX(r) {
			c.render(w, r, http.StatusUnprocessableEntity, views.LimitsSection(posted))
			return
		}
		refused(http.StatusUnprocessableEntity, posted)
	}
	l, msg := parseLimits(form)
	if msg != "" {
		reject(msg)
		return
	}
	if err := l.Validate(); err != nil {
		reject(validation(err))
		return
	}
	if form.Get("confirm") != "yes" {
		fields := map[string]string{}
		for _, name := range limitFields[:len(limitFields)-1] {
			fields[name] = form.Get(name)
		}
		var lines []string
		for _, line := range describeLimits(l) {
			lines = append(lines, line.Name+": "+line.Value)
		}
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(viewerFrom(r.Context()), tab),
			Title: "Change the limits of " + subject + "?", Message: strings.Join(lines, "; ") + ". They apply on every replica within a second.",
			Action: r.URL.Path, Fields: fields, Button: "Save limits", Cancel: back, Primary: true}))
		return
	}
	saved, err := save(l)
	if msg := validation(err); msg != "" {
		reject(msg)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !isHTMX(r) {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	f := limitsForm(saved)
	f.Action, f.Subject, f.Team, f.Saved = r.URL.Path, subject, posted.Team, true
	c.render(w, r, http.StatusOK, views.LimitsSection(f))
}

// parseLimits reads the limits form. A blank (or "none") number is no limit of
// that kind; the budget is in dollars, parsed exactly.
func parseLimits(form url.Values) (store.Limits, string) {
	l := store.Limits{RateAlgorithm: form.Get("algorithm"), BudgetPeriod: form.Get("budget_period"), RatePeriod: time.Second}
	switch limiter.Algorithm(l.RateAlgorithm) {
	case "", limiter.AlgorithmTokenBucket, limiter.AlgorithmSlidingWindow:
	default:
		return l, "Choose token bucket or sliding window."
	}
	switch limiter.Period(l.BudgetPeriod) {
	case "", limiter.PeriodDaily, limiter.PeriodMonthly, limiter.PeriodTotal:
	default:
		return l, "Choose a budget per day, per month or in total."
	}
	for _, f := range []struct {
		name, label string
		dst         *int64
	}{
		{"rate", "Requests", &l.RateLimit}, {"burst", "Burst", &l.RateBurst},
		{"tpm", "Tokens per minute", &l.TokensPerMinute}, {"concurrency", "Requests in flight", &l.Concurrency},
	} {
		v := strings.TrimSpace(form.Get(f.name))
		if blank(v) {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return l, f.label + " must be a whole number of at least 1, or blank for no limit."
		}
		*f.dst = n
	}
	if v := strings.TrimSpace(form.Get("period")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return l, "Per must be a time such as 1s, 1m or 1h."
		}
		l.RatePeriod = d
	}
	if v := strings.TrimSpace(form.Get("budget")); !blank(v) {
		micros, err := store.ParseDollars(v)
		if err != nil {
			return l, "Budget: " + err.Error() + "."
		}
		l.Budget = &micros
	}
	return l, ""
}

func blank(v string) bool { return v == "" || strings.EqualFold(v, "none") }

// postedLimitsForm refills the form exactly as it was posted.
func postedLimitsForm(form url.Values) views.LimitsForm {
	return views.LimitsForm{Algorithm: form.Get("algorithm"), Rate: form.Get("rate"), Period: form.Get("period"),
		Burst: form.Get("burst"), TPM: form.Get("tpm"), Concurrency: form.Get("concurrency"), Budget: form.Get("budget"),
		BudgetPeriod: form.Get("budget_period")}
}

// limitsForm is the form showing l.
func limitsForm(l store.Limits) views.LimitsForm {
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	f := views.LimitsForm{Algorithm: l.RateAlgorithm, Rate: num(l.RateLimit),
		Burst: num(l.RateBurst), TPM: num(l.TokensPerMinute), Concurrency: num(l.Concurrency), BudgetPeriod: l.BudgetPeriod}
	// No rate, no period: a blank "Requests" beside "Per 1s" reads as a limit half set.
	if l.RateLimit != 0 {
		f.Period = formatPeriod(l.RatePeriod)
	}
	if l.Budget != nil {
		f.Budget = store.FormatDollars(*l.Budget)
	}
	return f
}

// formatPeriod writes a rate period in its largest whole unit: 1s, 1m, 1h, 250ms.
func formatPeriod(d time.Duration) string {
	switch {
	case d <= 0:
		return "1s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
