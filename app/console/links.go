package console

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// One-time links: the first-run setup link and member invites. An unknown,
// used or expired token gets the same 404 page.

func (c *Console) showSetup(w http.ResponseWriter, r *http.Request) {
	inv, err := c.st.PendingSetupLink(r.Context(), chi.URLParam(r, "token"))
	if err != nil {
		c.linkGone(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.SetupPage(views.Setup{Action: r.URL.Path, ExpiresAt: formatTime(inv.ExpiresAt)}))
}

// completeSetup creates the team and its owner, then signs the owner in.
func (c *Console) completeSetup(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "team", "email", "password")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	token := chi.URLParam(r, "token")
	m, err := c.st.CompleteSetup(r.Context(), token, form.Get("team"), form.Get("email"), form.Get("password"))
	if msg := setupError(err); msg != "" {
		inv, err := c.st.PendingSetupLink(r.Context(), token)
		if err != nil {
			c.linkGone(w, r, err)
			return
		}
		c.render(w, r, http.StatusUnprocessableEntity, views.SetupPage(views.Setup{Action: r.URL.Path,
			Team: form.Get("team"), Email: form.Get("email"), ExpiresAt: formatTime(inv.ExpiresAt), Error: msg}))
		return
	}
	if err != nil {
		c.linkGone(w, r, err)
		return
	}
	if err := c.signInAs(w, r, m, Prefix+"/"); err != nil {
		c.fail(w, r, err)
	}
}

// setupError is the message for a refused setup form, or "" for other errors.
func setupError(err error) string {
	if errors.Is(err, store.ErrConflict) {
		return "A team with that name, or an account with that email, already exists."
	}
	return validation(err)
}

func (c *Console) showInvite(w http.ResponseWriter, r *http.Request) {
	vm, err := c.inviteForm(r)
	if err != nil {
		c.linkGone(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.InviteAcceptPage(vm))
}

// acceptInvite sets the invited member's password and signs them in. A team
// that signs in only through its provider refuses the password (403): the
// page then offers only its provider.
func (c *Console) acceptInvite(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "password")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := c.st.AcceptInvite(r.Context(), chi.URLParam(r, "token"), form.Get("password"))
	status, msg := http.StatusUnprocessableEntity, validation(err)
	if errors.Is(err, store.ErrPasswordSignInOff) {
		status, msg = http.StatusForbidden, "This team signs in through its identity provider only, so the invite cannot be accepted with a password."
	}
	if msg != "" {
		vm, err := c.inviteForm(r)
		if err != nil {
			c.linkGone(w, r, err)
			return
		}
		vm.Error = msg
		c.render(w, r, status, views.InviteAcceptPage(vm))
		return
	}
	if err != nil {
		c.linkGone(w, r, err)
		return
	}
	if err := c.signInAs(w, r, m, Prefix+"/"); err != nil {
		c.fail(w, r, err)
	}
}

func (c *Console) inviteForm(r *http.Request) (views.InviteAccept, error) {
	inv, err := c.st.PendingInvite(r.Context(), chi.URLParam(r, "token"))
	if err != nil {
		return views.InviteAccept{}, err
	}
	if inv.TeamID == nil {
		return views.InviteAccept{}, store.ErrNotFound // a setup link, not an invite
	}
	team, err := c.st.FindTeam(r.Context(), strconv.FormatInt(*inv.TeamID, 10))
	if err != nil {
		return views.InviteAccept{}, err
	}
	methods, err := c.st.SSOMethods(r.Context(), team.ID)
	if err != nil {
		return views.InviteAccept{}, err
	}
	vm := views.InviteAccept{Action: r.URL.Path, Team: team.Name, Email: inv.Email, Role: inv.Role, PasswordOff: !team.PasswordSignIn}
	for _, m := range methods {
		if m.Enabled {
			vm.Methods = append(vm.Methods, views.SignInMethod{Label: "Continue with " + m.DisplayName,
				URL: Prefix + "/invite/" + chi.URLParam(r, "token") + "/signin/" + m.Kind})
		}
	}
	return vm, nil
}

// linkGone answers a link that cannot be used (or, for other errors, the funnel).
func (c *Console) linkGone(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, store.ErrSetupDone) {
		c.render(w, r, http.StatusGone, views.SetupDonePage())
		return
	}
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusNotFound, views.LinkGonePage())
}

// formatTime is how the console shows a time: UTC, to the minute.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
