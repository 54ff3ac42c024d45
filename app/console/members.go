package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Owner pages about people: the member table, one member, invites, cut-off.

func (c *Console) listMembers(w http.ResponseWriter, r *http.Request) {
	var invite views.Invite // an invite the previous request made, shown once
	c.popFlash(w, r, flashInvite, &invite)
	vm, err := c.membersPage(r.Context(), invite)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.MembersPage(vm))
}

func (c *Console) membersPage(ctx context.Context, invite views.Invite) (views.Members, error) {
	v := viewerFrom(ctx)
	members, err := c.st.Members(ctx, v.team.ID)
	if err != nil {
		return views.Members{}, err
	}
	keys, err := c.st.Keys(ctx, v.team.ID)
	if err != nil {
		return views.Members{}, err
	}
	live := map[int64]int{}
	now := time.Now()
	for _, k := range keys {
		if keyWorks(k.State(now)) {
			live[k.MemberID]++
		}
	}
	figs, err := c.readTeamFigures(ctx, v.team.ID)
	if err != nil {
		return views.Members{}, err
	}
	lt, ok := c.readLive(ctx, v.team.ID)
	vm := views.Members{Nav: nav(v, views.TabMembers)}
	for _, m := range members {
		row := memberRow(v, m, live[m.ID])
		row.Usage = memberUsage(figs, lt, ok, m.ID)
		vm.Rows = append(vm.Rows, row)
	}
	vm.Invite, err = c.inviteSection(ctx, invite)
	return vm, err
}

func memberRow(v *viewer, m store.Member, liveKeys int) views.MemberRow {
	url := memberURL(m.ID)
	return views.MemberRow{ID: m.ID, Email: m.Email, Role: m.Role, Status: m.Status, Invited: m.Invited, Keys: liveKeys,
		URL: url, StatusURL: url + "/status", RemoveURL: url + "/remove", Self: m.ID == v.member.ID, SignIn: signInLabel(m.SignInMethod)}
}

// signInLabel names how a member last signed in, for the members table.
func signInLabel(method string) string {
	switch method {
	case store.SignInPassword:
		return "password"
	case store.SignInOIDC:
		return "OIDC"
	case store.SignInGitHub:
		return "GitHub"
	default:
		return "—"
	}
}

func (c *Console) inviteSection(ctx context.Context, vm views.Invite) (views.Invite, error) {
	teamID := viewerFrom(ctx).team.ID
	pending, err := c.st.PendingInvites(ctx, teamID)
	if err != nil {
		return vm, err
	}
	for _, p := range pending {
		vm.Pending = append(vm.Pending, views.PendingInvite{Email: p.Email, Role: p.Role, ExpiresAt: formatTime(p.ExpiresAt)})
	}
	tiers, err := c.st.Tiers(ctx, teamID)
	if err != nil {
		return vm, err
	}
	for _, t := range tiers {
		vm.Tiers = append(vm.Tiers, t.Name)
	}
	switch t, err := c.st.DefaultTier(ctx, teamID); {
	case err == nil:
		vm.Default = t.Name
	case !errors.Is(err, store.ErrNotFound):
		return vm, err
	}
	return vm, nil
}

// createInvite makes a one-time link; it is in this response only.
func (c *Console) createInvite(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "email", "role", "tier")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	vm := views.Invite{Email: form.Get("email"), Role: form.Get("role"), Tier: form.Get("tier")}
	status := http.StatusOK
	token, inv, err := c.st.CreateInviteInTier(r.Context(), v.actor(), v.team.ID, form.Get("email"), form.Get("role"), form.Get("tier"))
	if msg := validation(err); msg != "" {
		vm.Error, status = msg, http.StatusUnprocessableEntity
	} else if err != nil {
		c.fail(w, r, err)
		return
	} else {
		vm = views.Invite{Link: InviteURL(c.publicURL, token), LinkEmail: inv.Email, ExpiresAt: formatTime(inv.ExpiresAt)}
		if !isHTMX(r) {
			c.putFlash(w, r, flashInvite, vm)
			http.Redirect(w, r, Prefix+"/members", http.StatusSeeOther)
			return
		}
	}
	if isHTMX(r) {
		if vm, err = c.inviteSection(r.Context(), vm); err != nil {
			c.fail(w, r, err)
			return
		}
		c.render(w, r, status, views.InviteSection(vm))
		return
	}
	page, err := c.membersPage(r.Context(), vm)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, status, views.MembersPage(page))
}

// revokeInvite takes back the posted email's pending invites.
func (c *Console) revokeInvite(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "email")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	if err := c.st.RevokeInvites(r.Context(), v.actor(), v.team.ID, form.Get("email")); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/members#invite", http.StatusSeeOther)
}

// reissueInvite replaces the posted email's pending invites with a new link,
// shown once on the members page.
func (c *Console) reissueInvite(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "email")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	token, inv, err := c.st.ReissueInvite(r.Context(), v.actor(), v.team.ID, form.Get("email"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.putFlash(w, r, flashInvite, views.Invite{Link: InviteURL(c.publicURL, token), LinkEmail: inv.Email, ExpiresAt: formatTime(inv.ExpiresAt)})
	http.Redirect(w, r, Prefix+"/members#invite", http.StatusSeeOther)
}

// teamMember resolves the {id} of the path within the viewer's team.
func (c *Console) teamMember(r *http.Request) (store.Member, error) {
	if _, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64); err != nil {
		return store.Member{}, store.ErrNotFound
	}
	return c.st.FindMember(r.Context(), viewerFrom(r.Context()).team.ID, chi.URLParam(r, "id"))
}

func (c *Console) showMember(w http.ResponseWriter, r *http.Request) {
	m, err := c.teamMember(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vm, err := c.memberPage(r.Context(), m, c.popNewKeyOf(w, r, m.ID), "")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.MemberPage(vm))
}

func (c *Console) memberPage(ctx context.Context, m store.Member, issued *store.IssuedKey, keyErr string) (views.Member, error) {
	v := viewerFrom(ctx)
	keys, err := c.keysSection(ctx, m, issued, keyErr)
	if err != nil {
		return views.Member{}, err
	}
	live := 0
	for _, k := range keys.Rows {
		if keyWorks(k.State) {
			live++
		}
	}
	figs, err := c.readMemberFigures(ctx, v.team.ID, m.ID)
	if err != nil {
		return views.Member{}, err
	}
	limits := limitsForm(figs.limits)
	limits.Action, limits.Subject = memberURL(m.ID)+"/limits", m.Email
	tier, err := c.tierAssign(ctx, v.team.ID, m)
	if err != nil {
		return views.Member{}, err
	}
	return views.Member{Nav: nav(v, views.TabMembers), Row: memberRow(v, m, live), Keys: keys,
		Usage: c.usageView(ctx, v.team.ID, m.ID, figs, false), Limits: limits, Tier: tier}, nil
}

// memberURL is the owner's page of member id.
func memberURL(id int64) string { return Prefix + "/members/" + strconv.FormatInt(id, 10) }

// setMemberStatus cuts a member off or restores them. Cutting off asks first.
func (c *Console) setMemberStatus(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "status", "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := c.teamMember(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	status := form.Get("status")
	if m.ID == v.member.ID {
		c.failWith(w, r, http.StatusBadRequest, "Not yourself", "You cannot change your own status.")
		return
	}
	if status == store.StatusDisabled && form.Get("confirm") != "yes" {
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabMembers),
			Title: "Cut off " + m.Email + "?", Message: "Their keys are refused at once, on every replica, until an owner restores them.",
			Action: r.URL.Path, Fields: map[string]string{"status": status}, Button: "Cut off", Cancel: Prefix + "/members"}))
		return
	}
	m, err = c.st.SetMemberStatus(r.Context(), v.actor(), v.team.ID, m.ID, status)
	if msg := validation(err); msg != "" {
		c.failWith(w, r, http.StatusBadRequest, "Not changed", msg)
		return
	}
	if s, ok := errors.AsType[*store.StateError](err); ok { // the last active owner
		c.failWith(w, r, http.StatusConflict, "Not changed", s.Message)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !isHTMX(r) {
		http.Redirect(w, r, Prefix+"/members", http.StatusSeeOther)
		return
	}
	vm, err := c.memberPage(r.Context(), m, nil, "")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	figs, err := c.readTeamFigures(r.Context(), v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	lt, ok := c.readLive(r.Context(), v.team.ID)
	vm.Row.Usage = memberUsage(figs, lt, ok, m.ID)
	c.render(w, r, http.StatusOK, views.MemberRowView(vm.Row))
}

// removeMember takes a member out of the team for good, after a confirmation
// page: their keys are revoked and their sessions end; their usage and audit
// history stay.
func (c *Console) removeMember(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := c.teamMember(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	if m.ID == v.member.ID {
		c.failWith(w, r, http.StatusBadRequest, "Not yourself", "You cannot remove yourself from the team; another owner must.")
		return
	}
	if form.Get("confirm") != "yes" {
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabMembers),
			Title: "Remove " + m.Email + " from the team?",
			Message: "Their keys are revoked and their console sessions end at once, on every replica. Their usage and audit history stay. " +
				"This cannot be undone: to let them back, they need another email address.",
			Action: r.URL.Path, Button: "Remove", Cancel: memberURL(m.ID)}))
		return
	}
	_, err = c.st.RemoveMember(r.Context(), v.actor(), v.team.ID, m.ID)
	if s, ok := errors.AsType[*store.StateError](err); ok { // the last active owner, or already removed
		c.failWith(w, r, http.StatusConflict, "Not removed", s.Message)
		return
	}
	if f, ok := errors.AsType[*store.ForbiddenError](err); ok {
		c.failWith(w, r, http.StatusForbidden, "Not removed", f.Message)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/members", http.StatusSeeOther)
}

// nav is the header for the viewer with tab active.
func nav(v *viewer, tab string) views.Nav {
	return views.Nav{Email: v.member.Email, Team: v.team.Name, Owner: v.owner(), Active: tab}
}
