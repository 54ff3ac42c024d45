package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/app/sso"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Session keys of a single sign-on flow between its start and its callback.
// They live in the browser's server-side session, so a callback is accepted
// only in the browser that started the flow, and only once.
const (
	sessionSSOMethod   = "sso_method" // "<team>/<kind>"
	sessionSSOState    = "sso_state"
	sessionSSONonce    = "sso_nonce"
	sessionSSOVerifier = "sso_verifier"
	sessionSSONext     = "sso_next"   // the console page to return to, as the password sign-in keeps it
	sessionSSOInvite   = "sso_invite" // the invite the flow completes (store.InviteRef, never the link)
)

// ssoCheckTimeout bounds trying a configuration against its provider.
const ssoCheckTimeout = 10 * time.Second

var ssoKinds = []string{store.SignInOIDC, store.SignInGitHub}

func ssoTitle(kind string) string {
	return map[string]string{store.SignInOIDC: "OpenID Connect", store.SignInGitHub: "GitHub"}[kind]
}

func ssoSignInURL(m store.SSOMethod) string {
	return Prefix + "/signin/" + m.TeamName + "/" + m.Kind
}

// SSOCallbackURL is the redirect URL a team registers with its provider.
func SSOCallbackURL(publicURL, teamName, kind string) string {
	return strings.TrimRight(publicURL, "/") + Prefix + "/signin/" + teamName + "/" + kind + "/callback"
}

// SSOConfig is the flow's view of a stored method, with its secret from getenv.
func SSOConfig(publicURL string, getenv func(string) string, m store.SSOMethod) sso.Config {
	return sso.Config{Kind: m.Kind, IssuerURL: m.IssuerURL, ClientID: m.ClientID,
		ClientSecret: getenv(store.SSOSecretEnv(m.TeamName, m.Kind)),
		RedirectURL:  SSOCallbackURL(publicURL, m.TeamName, m.Kind), Org: m.AllowedOrg}
}

func (c *Console) ssoConfig(m store.SSOMethod) sso.Config { return SSOConfig(c.publicURL, c.getenv, m) }

// signInButtons are the enabled methods of every team, for the sign-in page;
// each carries next, the page to return to.
func (c *Console) signInButtons(ctx context.Context, next string) ([]views.SignInMethod, error) {
	methods, err := c.st.EnabledSSOMethods(ctx)
	buttons := make([]views.SignInMethod, len(methods))
	for i, m := range methods {
		u := ssoSignInURL(m)
		if next != "" {
			u += "?next=" + url.QueryEscape(next)
		}
		buttons[i] = views.SignInMethod{Label: fmt.Sprintf("Sign in with %s (%s)", m.DisplayName, m.TeamName), URL: u}
	}
	return buttons, err
}

// renderSignIn shows the sign-in page with its buttons and vm's message.
func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, vm views.SignIn) {
	buttons, err := c.signInButtons(r.Context(), vm.Next)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vm.Methods = buttons
	c.render(w, r, status, views.SignInPage(vm))
}

// startSSO sends the browser to the team's provider, keeping the flow's
// state, nonce and PKCE verifier in its session.
func (c *Console) startSSO(w http.ResponseWriter, r *http.Request) {
	if viewerFrom(r.Context()) != nil {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	ctx := r.Context()
	method, err := c.st.EnabledSSOMethod(ctx, chi.URLParam(r, "team"), chi.URLParam(r, "kind"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.beginSSO(w, r, method, safeNext(r.URL.Query().Get("next")), "")
}

// startInviteSSO completes an invite through one of the invited team's
// methods: the same flow as a sign-in, with the invite kept (by reference) in
// the session for the callback. It is the only way into a team whose password
// sign-in is off.
func (c *Console) startInviteSSO(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token := chi.URLParam(r, "token")
	inv, err := c.st.PendingInvite(ctx, token)
	if err == nil && inv.TeamID == nil {
		err = store.ErrNotFound // a setup link, not an invite
	}
	var team store.Team
	if err == nil {
		team, err = c.st.FindTeam(ctx, strconv.FormatInt(*inv.TeamID, 10))
	}
	if err != nil {
		c.linkGone(w, r, err)
		return
	}
	method, err := c.st.EnabledSSOMethod(ctx, team.Name, chi.URLParam(r, "kind"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.beginSSO(w, r, method, "", store.InviteRef(token))
}

// beginSSO sends the browser to method's provider, keeping the flow's state,
// nonce and PKCE verifier, where to go afterwards and the invite it completes
// ("" for a sign-in) in its session.
func (c *Console) beginSSO(w http.ResponseWriter, r *http.Request, method store.SSOMethod, next, inviteRef string) {
	if c.ssoThrottled(w, r, "") {
		return
	}
	ctx := r.Context()
	url, flow, err := c.sso.Begin(ctx, c.ssoConfig(method))
	if err != nil {
		c.ssoFailed(w, r, method, "", err)
		return
	}
	c.sessions.Put(ctx, sessionSSOMethod, method.TeamName+"/"+method.Kind)
	c.sessions.Put(ctx, sessionSSOState, flow.State)
	c.sessions.Put(ctx, sessionSSONonce, flow.Nonce)
	c.sessions.Put(ctx, sessionSSOVerifier, flow.Verifier)
	c.sessions.Put(ctx, sessionSSONext, next)
	c.sessions.Put(ctx, sessionSSOInvite, inviteRef)
	http.Redirect(w, r, url, http.StatusSeeOther)
}

// finishSSO is the provider's redirect back: the flow is taken out of the
// session (a callback works once), the provider's answer verified, and the
// team's join policy applied by the store, or the flow's invite completed.
func (c *Console) finishSSO(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	method, err := c.st.EnabledSSOMethod(ctx, chi.URLParam(r, "team"), chi.URLParam(r, "kind"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// The callback takes its attempt before the provider's answer is checked,
	// as a password sign-in does, so concurrent refused callbacks cannot all
	// pass a check made before any of them is counted.
	id := rand.Text()
	if c.ssoThrottled(w, r, id) {
		return
	}
	started := c.sessions.PopString(ctx, sessionSSOMethod)
	flow := sso.Flow{State: c.sessions.PopString(ctx, sessionSSOState), Nonce: c.sessions.PopString(ctx, sessionSSONonce),
		Verifier: c.sessions.PopString(ctx, sessionSSOVerifier)}
	next := safeNext(c.sessions.PopString(ctx, sessionSSONext))
	inviteRef := c.sessions.PopString(ctx, sessionSSOInvite)
	if started != method.TeamName+"/"+method.Kind {
		flow = sso.Flow{} // a flow of another method: its state cannot match this callback
	}
	identity, err := c.sso.Finish(ctx, c.ssoConfig(method), flow, r.URL.Query())
	if err != nil {
		c.ssoFailed(w, r, method, id, err)
		return
	}
	who := store.SSOIdentity{Email: identity.Email, OrgMember: identity.OrgMember}
	var m store.Member
	if inviteRef != "" {
		m, err = c.st.AcceptInviteSSO(ctx, method, inviteRef, who)
		if errors.Is(err, store.ErrNotFound) {
			c.linkGone(w, r, err) // used or expired while the person was at the provider
			return
		}
	} else {
		m, err = c.st.SSOSignIn(ctx, method, who)
	}
	if err != nil {
		c.ssoFailed(w, r, method, id, err)
		return
	}
	c.giveBack(ctx, id, c.ssoKey(r))
	if err := c.signInAs(w, r, m, cmp.Or(next, Prefix+"/")); err != nil {
		c.fail(w, r, err)
	}
}

// ssoKey is the throttle key of a single sign-on attempt: per client
// address, apart from password sign-ins but under the same limit.
func (c *Console) ssoKey(r *http.Request) string { return "sso:" + addressBucket(c.clientAddress(r)) }

// ssoThrottled refuses an address past its limit of failed SSO sign-ins. With
// an attempt id it takes that attempt's slot; without one (the start of a
// flow, which is no attempt yet) it only looks.
func (c *Console) ssoThrottled(w http.ResponseWriter, r *http.Request, id string) bool {
	bucket := bucket{c.ssoKey(r), c.limit.PerAddress}
	var wait time.Duration
	var err error
	if id == "" {
		wait, err = c.throttle.Wait(r.Context(), bucket)
	} else {
		wait, err = c.throttle.Take(r.Context(), id, bucket)
	}
	if err != nil {
		c.throttleFailed(w, r, err, views.SignIn{})
		return true
	}
	if wait <= 0 {
		return false
	}
	observe.Security(r.Context(), c.log, "console_sso", "locked_out", slog.String("address", c.clientAddress(r)))
	c.tooMany(w, r, wait, views.SignIn{})
	return true
}

// ssoFailed answers a sign-in that did not work with the sign-in page and a
// message saying whose problem it is: the person's (refused, 403, counted
// against the address) or the team's configuration (502, for an owner to fix,
// which gives attempt id back).
func (c *Console) ssoFailed(w http.ResponseWriter, r *http.Request, m store.SSOMethod, id string, err error) {
	label := "Sign-in with " + m.DisplayName
	if pe, ok := errors.AsType[*sso.ProviderError](err); ok {
		if id != "" {
			c.giveBack(r.Context(), id, c.ssoKey(r))
		}
		c.log.Warn("console: single sign-on provider unusable", "team_id", m.TeamID, "kind", m.Kind, "problem", pe.Problem)
		c.renderSignIn(w, r, http.StatusBadGateway, views.SignIn{
			Error: label + " is not working: " + pe.Problem + ". A team owner can check it on the team's sign-in page."})
		return
	}
	var reason string
	if re, ok := errors.AsType[*sso.RefusedError](err); ok {
		reason = re.Reason
	} else if re, ok := errors.AsType[*store.SignInRefusedError](err); ok {
		reason = re.Reason
	} else {
		c.fail(w, r, err)
		return
	}
	observe.Security(r.Context(), c.log, "console_sso", "refused", slog.String("address", c.clientAddress(r)),
		slog.Int64("team_id", m.TeamID), slog.String("kind", m.Kind))
	c.renderSignIn(w, r, http.StatusForbidden, views.SignIn{Error: label + " refused: " + reason + "."})
}

// checkSSO tries a method against its provider: whether its secret is set and
// whether the provider answers and accepts the client.
func (c *Console) checkSSO(ctx context.Context, m store.SSOMethod) (string, bool) {
	env := store.SSOSecretEnv(m.TeamName, m.Kind)
	if c.getenv(env) == "" {
		return env + " is not set on this replica: sign-in fails until it is.", false
	}
	ctx, cancel := context.WithTimeout(ctx, ssoCheckTimeout)
	defer cancel()
	if err := c.sso.Probe(ctx, c.ssoConfig(m)); err != nil {
		return "Check failed: " + err.Error() + ".", false
	}
	return "Checked: the provider answers and accepts the client id and secret.", true
}

func (c *Console) showSignInSettings(w http.ResponseWriter, r *http.Request) {
	vm, err := c.signInSettings(r.Context(), nil, "")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, views.SignInSettingsPage(vm))
}

// signInSettings is the settings page, with edited in place of its kind's
// stored form when a save is being answered.
func (c *Console) signInSettings(ctx context.Context, edited *views.SSOForm, passwordError string) (views.SignInSettings, error) {
	v := viewerFrom(ctx)
	methods, err := c.st.SSOMethods(ctx, v.team.ID)
	if err != nil {
		return views.SignInSettings{}, err
	}
	vm := views.SignInSettings{Nav: nav(v, views.TabMembers), PasswordSignIn: v.team.PasswordSignIn,
		PasswordAction: Prefix + "/team/sign-in/password", PasswordError: passwordError}
	for _, kind := range ssoKinds {
		if edited != nil && edited.Kind == kind {
			vm.Methods = append(vm.Methods, *edited)
			continue
		}
		m := store.SSOMethod{TeamID: v.team.ID, TeamName: v.team.Name, Kind: kind, JoinPolicy: store.JoinInvited}
		if i := slices.IndexFunc(methods, func(m store.SSOMethod) bool { return m.Kind == kind }); i >= 0 {
			m = methods[i]
		}
		vm.Methods = append(vm.Methods, c.ssoForm(m))
	}
	return vm, nil
}

func (c *Console) ssoForm(m store.SSOMethod) views.SSOForm {
	env := store.SSOSecretEnv(m.TeamName, m.Kind)
	return views.SSOForm{Kind: m.Kind, Title: ssoTitle(m.Kind), Action: Prefix + "/team/sign-in/sso/" + m.Kind,
		DisplayName: m.DisplayName, IssuerURL: m.IssuerURL, ClientID: m.ClientID, JoinPolicy: m.JoinPolicy,
		Domains: strings.Join(m.AllowedDomains, ", "), Org: m.AllowedOrg, Enabled: m.Enabled,
		SecretEnv: env, SecretSet: c.getenv(env) != "", CallbackURL: SSOCallbackURL(c.publicURL, m.TeamName, m.Kind)}
}

// setSSOMethod saves a team's method, then tries it, so a wrong issuer or
// secret shows here rather than at a member's sign-in.
func (c *Console) setSSOMethod(w http.ResponseWriter, r *http.Request) {
	kind := chi.URLParam(r, "kind")
	if !slices.Contains(ssoKinds, kind) {
		c.fail(w, r, store.ErrNotFound)
		return
	}
	form, err := readForm(w, r, "display_name", "issuer_url", "client_id", "join_policy", "allowed_domains", "allowed_org", "enabled")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	m := store.SSOMethod{TeamID: v.team.ID, TeamName: v.team.Name, Kind: kind, DisplayName: form.Get("display_name"),
		IssuerURL: form.Get("issuer_url"), ClientID: form.Get("client_id"), JoinPolicy: form.Get("join_policy"),
		AllowedDomains: strings.Split(form.Get("allowed_domains"), ","), AllowedOrg: form.Get("allowed_org"),
		Enabled: form.Get("enabled") == "on"}
	saved, err := c.st.SetSSOMethod(ctx, v.actor(), m)
	var f views.SSOForm
	status := http.StatusOK
	switch se, isState := errors.AsType[*store.StateError](err); {
	case validation(err) != "":
		f, status = c.ssoForm(m), http.StatusUnprocessableEntity
		f.Error = validation(err)
	case isState:
		f, status = c.ssoForm(m), http.StatusConflict
		f.Error = se.Message
	case err != nil:
		c.fail(w, r, err)
		return
	default:
		f = c.ssoForm(saved)
		f.Saved = true
		f.Check, f.CheckOK = c.checkSSO(ctx, saved)
	}
	vm, err := c.signInSettings(ctx, &f, "")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, status, views.SignInSettingsPage(vm))
}

// setPasswordSignIn turns password sign-in on or off. Off needs an enabled
// method that works now, so the team is not locked out by a typo.
func (c *Console) setPasswordSignIn(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "password_sign_in")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	on := form.Get("password_sign_in") != "off"
	problem := ""
	if !on {
		problem = c.workingSSO(ctx, v.team)
	}
	if problem == "" {
		t, err := c.st.SetPasswordSignIn(ctx, v.actor(), v.team.ID, on)
		if se, ok := errors.AsType[*store.StateError](err); ok {
			problem = se.Message
		} else if err != nil {
			c.fail(w, r, err)
			return
		} else {
			v.team = t
		}
	}
	if problem == "" {
		http.Redirect(w, r, Prefix+"/team/sign-in", http.StatusSeeOther)
		return
	}
	vm, err := c.signInSettings(ctx, nil, problem)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusConflict, views.SignInSettingsPage(vm))
}

// workingSSO is "" if one of the team's enabled methods passes its check, else
// why password sign-in must stay on.
func (c *Console) workingSSO(ctx context.Context, team store.Team) string {
	methods, err := c.st.SSOMethods(ctx, team.ID)
	if err != nil {
		return "the team's sign-in methods could not be read"
	}
	var problems []string
	for _, m := range methods {
		if !m.Enabled {
			continue
		}
		msg, ok := c.checkSSO(ctx, m)
		if ok {
			return ""
		}
		problems = append(problems, ssoTitle(m.Kind)+": "+msg)
	}
	if len(problems) == 0 {
		return "Password sign-in stays on: enable a single sign-on method first, or nobody could sign in."
	}
	return "Password sign-in stays on: no enabled single sign-on method works. " + strings.Join(problems, " ")
}
