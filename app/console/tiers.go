package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Owners manage limit tiers and answer budget requests through the same
// audited store functions as `tollgate admin tier` and `admin budget`.
// Members may only ask, for themselves: the request form names no member,
// and deciding is owner-only (the store also refuses one's own request).

func tierURL(name string) string { return Prefix + "/tiers/" + url.PathEscape(name) }

func (c *Console) listTiers(w http.ResponseWriter, r *http.Request) {
	c.renderTiers(w, r, http.StatusOK, "", "")
}

func (c *Console) renderTiers(w http.ResponseWriter, r *http.Request, status int, name, msg string) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	tiers, err := c.st.Tiers(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vm := views.Tiers{Nav: nav(v, views.TabMembers), Name: name, Error: msg}
	for _, t := range tiers {
		row := views.TierRow{Name: t.Name, URL: tierURL(t.Name), Members: t.Members, Weight: t.Weight, Limits: limitsSentence(t.Limits)}
		if t.AutoApprove > 0 {
			row.AutoApprove = store.FormatDollars(t.AutoApprove)
		}
		vm.Rows = append(vm.Rows, row)
	}
	c.render(w, r, status, views.TiersPage(vm))
}

func (c *Console) createTier(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "name")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	t, err := c.st.CreateTier(ctx, v.actor(), v.team.ID, store.NewTier(form.Get("name")))
	if msg := validation(err); msg != "" {
		c.renderTiers(w, r, http.StatusUnprocessableEntity, form.Get("name"), msg)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, tierURL(t.Name), http.StatusSeeOther)
}

func (c *Console) showTier(w http.ResponseWriter, r *http.Request) {
	t, err := c.st.FindTier(r.Context(), viewerFrom(r.Context()).team.ID, chi.URLParam(r, "name"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.renderTier(w, r, http.StatusOK, t, tierForm(t), "")
}

func tierForm(t store.Tier) views.TierEdit {
	f := views.TierEdit{Name: t.Name, Members: t.Members, Limits: limitsForm(t.Limits), Weight: strconv.FormatInt(t.Weight, 10),
		OverBudget: string(t.OverBudget)}
	if t.AutoApprove > 0 {
		f.AutoApprove = store.FormatDollars(t.AutoApprove)
	}
	return f
}

func (c *Console) renderTier(w http.ResponseWriter, r *http.Request, status int, t store.Tier, f views.TierEdit, msg string) {
	v := viewerFrom(r.Context())
	f.Nav, f.Name, f.DeleteURL = nav(v, views.TabMembers), t.Name, tierURL(t.Name)+"/delete"
	f.Limits.Action, f.Limits.Error = tierURL(t.Name), msg
	c.render(w, r, status, views.TierPage(f))
}

func (c *Console) setTier(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, append([]string{"weight", "auto_approve", "over_budget"}, limitFields...)...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	t, err := c.st.FindTier(ctx, v.team.ID, chi.URLParam(r, "name"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	posted := views.TierEdit{Limits: postedLimitsForm(form), Weight: form.Get("weight"), AutoApprove: form.Get("auto_approve"),
		OverBudget: form.Get("over_budget")}
	l, msg := parseLimits(form)
	weight, werr := strconv.ParseInt(strings.TrimSpace(form.Get("weight")), 10, 64)
	if msg == "" && werr != nil {
		msg = "Weight must be a whole number from 1 to 1000."
	}
	var ceiling int64
	if a := strings.TrimSpace(form.Get("auto_approve")); msg == "" && !blank(a) {
		if ceiling, err = store.ParseDollars(a); err != nil {
			msg = "Auto-approve: " + err.Error() + "."
		}
	}
	over, oerr := store.ParseOverBudget(form.Get("over_budget"))
	if msg == "" && oerr != nil {
		msg = "When a request does not fit: choose refuse or fit."
	}
	if msg == "" {
		_, err = c.st.ChangeTier(ctx, v.actor(), v.team.ID, t.Name, func(tr store.Tier) store.Tier {
			tr.Limits, tr.Weight, tr.AutoApprove, tr.OverBudget = l, weight, ceiling, over
			return tr
		})
		msg = validation(err)
	}
	if msg != "" {
		c.renderTier(w, r, http.StatusUnprocessableEntity, t, posted, msg)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, tierURL(t.Name), http.StatusSeeOther)
}

func (c *Console) deleteTier(w http.ResponseWriter, r *http.Request) {
	if _, err := readForm(w, r); err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	if err := c.st.DeleteTier(ctx, v.actor(), v.team.ID, chi.URLParam(r, "name")); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/tiers", http.StatusSeeOther)
}

func (c *Console) setMemberTier(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "tier")
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
	if _, err := c.st.AssignTier(ctx, v.actor(), v.team.ID, m.ID, form.Get("tier")); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, memberURL(m.ID)+"#tier", http.StatusSeeOther)
}

// tierAssign is the tier picker of member m's page.
func (c *Console) tierAssign(ctx context.Context, teamID int64, m store.Member) (*views.TierAssign, error) {
	tiers, err := c.st.Tiers(ctx, teamID)
	if err != nil {
		return nil, err
	}
	e, err := c.st.EffectiveLimits(ctx, teamID, m.ID)
	if err != nil {
		return nil, err
	}
	a := &views.TierAssign{Action: memberURL(m.ID) + "/tier", Current: e.Tier}
	for _, t := range tiers {
		a.Options = append(a.Options, t.Name)
	}
	return a, nil
}

// budgetAsk is the viewer's own request form and their newest requests.
func (c *Console) budgetAsk(ctx context.Context, teamID, memberID int64) (views.BudgetAsk, error) {
	var a views.BudgetAsk
	e, err := c.st.EffectiveLimits(ctx, teamID, memberID)
	if err != nil {
		return a, err
	}
	if e.Limits.Budget != nil {
		a.Action = Prefix + "/budget-requests"
	}
	reqs, err := c.st.MemberBudgetRequests(ctx, teamID, memberID, 10)
	if err != nil {
		return a, err
	}
	for _, r := range reqs {
		a.Requests = append(a.Requests, requestRow(r))
	}
	return a, nil
}

func requestRow(r store.BudgetRequest) views.BudgetRequestRow {
	status := r.Status
	if r.AutoApproved {
		status = "approved at once (within your tier's ceiling)"
	}
	return views.BudgetRequestRow{ID: r.ID, Email: r.Email, Amount: store.FormatDollars(r.Amount), Asked: formatTime(r.CreatedAt),
		Reason: r.Reason, Status: status, Note: r.Note}
}

// requestBudget asks for more budget for the viewer: the form has no member field.
func (c *Console) requestBudget(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "amount", "reason")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	msg := ""
	amount, perr := store.ParseDollars(form.Get("amount"))
	if perr != nil {
		msg = "Amount: " + perr.Error() + "."
	} else {
		_, err = c.st.RequestBudget(ctx, v.actor(), v.team.ID, v.member.ID, amount, form.Get("reason"))
		msg = validation(err)
		if s, ok := errors.AsType[*store.StateError](err); ok {
			msg = s.Message // too many waiting: said beside the form
		}
		if msg == "" && err != nil {
			c.fail(w, r, err)
			return
		}
	}
	if !isHTMX(r) && msg == "" {
		http.Redirect(w, r, Prefix+"/#budget-requests", http.StatusSeeOther)
		return
	}
	a, err := c.budgetAsk(ctx, v.team.ID, v.member.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if msg != "" {
		status, a.Amount, a.Reason, a.Error = http.StatusUnprocessableEntity, form.Get("amount"), form.Get("reason"), msg
	}
	c.render(w, r, status, views.BudgetAskSection(a))
}

func (c *Console) approveBudgetRequest(w http.ResponseWriter, r *http.Request) {
	c.decideBudgetRequest(w, r, true)
}

func (c *Console) declineBudgetRequest(w http.ResponseWriter, r *http.Request) {
	c.decideBudgetRequest(w, r, false)
}

func (c *Console) decideBudgetRequest(w http.ResponseWriter, r *http.Request, approve bool) {
	form, err := readForm(w, r, "note")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		c.fail(w, r, store.ErrNotFound)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	decide := c.st.DeclineBudgetRequest
	if approve {
		decide = c.st.ApproveBudgetRequest
	}
	if _, err := decide(ctx, v.actor(), v.team.ID, id, form.Get("note")); err != nil {
		if msg := validation(err); msg != "" {
			c.failWith(w, r, http.StatusUnprocessableEntity, "Not decided", msg)
			return
		}
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/dashboard#pending-requests", http.StatusSeeOther)
}

// pendingRequests is the dashboard's list of requests to answer.
func (c *Console) pendingRequests(ctx context.Context, teamID int64) ([]views.BudgetRequestRow, error) {
	reqs, err := c.st.PendingBudgetRequests(ctx, teamID)
	if err != nil {
		return nil, err
	}
	rows := make([]views.BudgetRequestRow, len(reqs))
	for i, r := range reqs {
		rows[i] = requestRow(r)
		base := Prefix + "/budget-requests/" + strconv.FormatInt(r.ID, 10)
		rows[i].ApproveURL, rows[i].DeclineURL = base+"/approve", base+"/decline"
	}
	return rows, nil
}
