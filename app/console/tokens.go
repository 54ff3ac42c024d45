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

// The owners' admin tokens page: the same store functions as `tollgate admin
// token`, scoped to the viewer's team (a deployment token is the operator's,
// from the CLI only), audited as the owner who acted.

const flashNewAdminToken = "flash_new_admin_token" // a token just made, with its secret

func (c *Console) listAdminTokens(w http.ResponseWriter, r *http.Request) {
	var section views.AdminTokens
	var issued views.NewAdminToken
	if c.popFlash(w, r, flashNewAdminToken, &issued) {
		section.New = &issued
	}
	c.renderAdminTokens(w, r, http.StatusOK, section)
}

// createAdminToken makes a token of the viewer's team, shown once: after a
// plain form post on the page the redirect leads to, so a reload makes none.
func (c *Console) createAdminToken(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "name", "role", "expires_days")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	section := views.AdminTokens{Name: form.Get("name"), Role: form.Get("role"), ExpiresDays: form.Get("expires_days")}
	days, err := strconv.ParseInt(section.ExpiresDays, 10, 64)
	if err != nil {
		section.Error = "Choose when the token expires."
		c.renderAdminTokens(w, r, http.StatusUnprocessableEntity, section)
		return
	}
	var t store.IssuedAdminToken
	lifetime, err := store.TokenLifetimeDays(days)
	if err == nil {
		t, err = c.st.CreateAdminToken(ctx, v.actor(), store.AdminTokenSpec{TeamID: &v.team.ID, Name: section.Name,
			Role: section.Role, Lifetime: lifetime})
	}
	if msg := validation(err); msg != "" {
		section.Error = msg
		c.renderAdminTokens(w, r, http.StatusUnprocessableEntity, section)
		return
	} else if err != nil {
		c.fail(w, r, err)
		return
	}
	issued := views.NewAdminToken{ID: t.ID, Name: t.Name, Role: t.Role, ExpiresAt: formatTime(t.ExpiresAt), Plaintext: t.Plaintext}
	if !isHTMX(r) {
		c.putFlash(w, r, flashNewAdminToken, issued)
		http.Redirect(w, r, views.AdminTokensURL, http.StatusSeeOther)
		return
	}
	c.renderAdminTokens(w, r, http.StatusOK, views.AdminTokens{New: &issued})
}

// revokeAdminToken stops a token of the viewer's team, after a confirmation
// (the page works without JavaScript). Another team's token is a 404.
func (c *Console) revokeAdminToken(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	t, err := c.teamAdminToken(ctx, v, chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if form.Get("confirm") != "yes" {
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabMembers),
			Title: "Revoke the admin token " + t.Name + "?", Message: "Calls with it are refused at once. This cannot be undone.",
			Action: r.URL.Path, Button: "Revoke", Cancel: views.AdminTokensURL}))
		return
	}
	_, err = c.st.RevokeAdminToken(ctx, v.actor(), &v.team.ID, t.ID)
	if s, ok := errors.AsType[*store.StateError](err); ok {
		// Revoked already (another owner, the CLI): say so, as for keys. HTMX
		// swaps no 409, so there the section carries the message.
		status := http.StatusConflict
		if isHTMX(r) {
			status = http.StatusOK
		}
		c.renderAdminTokens(w, r, status, views.AdminTokens{Error: s.Message})
		return
	} else if err != nil {
		c.fail(w, r, err)
		return
	}
	if !isHTMX(r) {
		http.Redirect(w, r, views.AdminTokensURL, http.StatusSeeOther)
		return
	}
	c.renderAdminTokens(w, r, http.StatusOK, views.AdminTokens{})
}

// teamAdminToken is the token id of the viewer's team, or ErrNotFound.
func (c *Console) teamAdminToken(ctx context.Context, v *viewer, id string) (store.AdminToken, error) {
	t, err := c.st.FindAdminToken(ctx, id)
	if err != nil {
		return store.AdminToken{}, err
	}
	if t.TeamID == nil || *t.TeamID != v.team.ID {
		return store.AdminToken{}, store.ErrNotFound
	}
	return t, nil
}

// renderAdminTokens answers with the tokens section (HTMX) or its page,
// section's list filled from the store.
func (c *Console) renderAdminTokens(w http.ResponseWriter, r *http.Request, status int, section views.AdminTokens) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	tokens, err := c.st.AdminTokens(ctx, &v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	members, err := c.st.Members(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	n := auditNames{emails: map[string]string{}}
	for _, m := range members {
		n.emails[strconv.FormatInt(m.ID, 10)] = m.Email
	}
	now := time.Now()
	for _, t := range tokens {
		row := views.AdminTokenRow{ID: t.ID, Name: t.Name, Role: t.Role, State: t.State(now), ExpiresAt: formatTime(t.ExpiresAt),
			LastUsed: "never", CreatedBy: "unknown"}
		if t.LastUsedAt != nil {
			row.LastUsed = formatTime(*t.LastUsedAt)
		}
		if t.CreatedBy != "" {
			row.CreatedBy = n.actor(t.CreatedBy)
		}
		switch t.Owner {
		case store.OwnerMember:
			row.Owner = t.OwnerEmail
		case store.OwnerDeployment:
			row.Owner = "the deployment"
		default:
			row.Owner = "no one (revoked)"
		}
		if row.State == "active" {
			row.RevokeURL = views.AdminTokensURL + "/" + t.ID + "/revoke"
		}
		section.Rows = append(section.Rows, row)
	}
	c.pageOrPartial(w, r, status, views.AdminTokensPageView(views.AdminTokensPage{Nav: nav(v, views.TabMembers), Section: section}),
		views.AdminTokensSection(section))
}
