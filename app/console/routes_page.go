package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Owner pages for routes: list, add from a preset, edit, spread over more
// upstreams, set retries and health probes, delete: what `tollgate admin` does
// for routes, through the same store calls. Whether a route's credential
// variable is set is shown; its value never is.

var routeFields = []string{"prefix", "upstream", "dialect", "header", "credential_env", "format", "fail_mode"}

func (c *Console) listRoutes(w http.ResponseWriter, r *http.Request) {
	c.renderRoutes(w, r, http.StatusOK, views.RouteForm{Preset: "anthropic"})
}

func (c *Console) renderRoutes(w http.ResponseWriter, r *http.Request, status int, form views.RouteForm) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	routes, err := c.st.Routes(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vm := views.Routes{Nav: nav(v, views.TabRoutes)}
	for _, rt := range routes {
		vm.Rows = append(vm.Rows, views.RouteRow{ID: rt.ID, Prefix: rt.Prefix, Upstream: rt.UpstreamURL, Dialect: rt.Dialect,
			Header: rt.CredentialHeader, CredentialEnv: rt.CredentialEnv, CredentialSet: c.getenv(rt.CredentialEnv) != "",
			FailMode: rt.FailMode, EditURL: routeURL(rt.ID),
			MaxAttempts: rt.MaxAttempts, HealthPath: rt.HealthPath, Disabled: rt.Disabled})
		row := &vm.Rows[len(vm.Rows)-1]
		for _, tg := range rt.Targets {
			env := cmp.Or(tg.CredentialEnv, rt.CredentialEnv)
			row.Targets = append(row.Targets, views.RouteTargetRow{Upstream: tg.UpstreamURL, CredentialEnv: env, CredentialSet: c.getenv(env) != ""})
		}
	}
	form.Action, form.Add, form.Credentials = Prefix+"/routes", true, c.credentials(v)
	vm.Form = form
	c.render(w, r, status, views.RoutesPage(vm))
}

func (c *Console) addRoute(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, append(routeFields, "preset")...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	spec := routeSpec(v.team.ID, form)
	spec.Preset = form.Get("preset")
	_, err = c.st.AddRoute(r.Context(), v.actor(), spec)
	if msg := routeError(err); msg != "" {
		c.renderRoutes(w, r, http.StatusUnprocessableEntity, routeForm(form, msg))
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/routes", http.StatusSeeOther)
}

func (c *Console) showRoute(w http.ResponseWriter, r *http.Request) {
	rt, err := c.teamRoute(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vm := c.routeEdit(r.Context(), rt)
	vm.ResilienceSaved = r.URL.Query().Has("saved")
	c.render(w, r, http.StatusOK, views.RouteEditPage(vm))
}

// routeEdit is route rt's page as stored; a handler re-rendering a refused
// form puts the posted values and the message over it.
func (c *Console) routeEdit(ctx context.Context, rt store.Route) views.RouteEdit {
	url := routeURL(rt.ID)
	vm := views.RouteEdit{Nav: nav(viewerFrom(ctx), views.TabRoutes),
		Form: views.RouteForm{Action: url, Prefix: rt.Prefix, Upstream: rt.UpstreamURL, Dialect: rt.Dialect, Header: rt.CredentialHeader,
			CredentialEnv: rt.CredentialEnv, Format: rt.CredentialFormat, FailMode: rt.FailMode},
		Upstream: rt.UpstreamURL, Credential: rt.CredentialHeader != "", TargetsURL: url + "/targets",
		ResilienceURL: url + "/resilience", Attempts: strconv.Itoa(rt.MaxAttempts), HealthPath: rt.HealthPath,
		DeleteURL: url + "/delete"}
	for _, tg := range rt.Targets {
		vm.Targets = append(vm.Targets, views.RouteTargetRow{Upstream: tg.UpstreamURL, CredentialEnv: cmp.Or(tg.CredentialEnv, rt.CredentialEnv)})
	}
	vm.Credentials = c.credentials(viewerFrom(ctx))
	vm.Form.Credentials = vm.Credentials
	return vm
}

// credentials are the credential variables the deployment grants v's team:
// the only ones its route forms offer.
func (c *Console) credentials(v *viewer) []views.Credential {
	var out []views.Credential
	for _, g := range c.st.Grants().ForTeam(v.team.Name) {
		out = append(out, views.Credential{Env: g.Env, Hosts: strings.Join(g.Hosts, ", ")})
	}
	return out
}

func routeURL(id int64) string { return Prefix + "/routes/" + strconv.FormatInt(id, 10) }

// pathRoute is the {id} route of the path, with its page as stored.
func (c *Console) pathRoute(w http.ResponseWriter, r *http.Request) (store.Route, views.RouteEdit, bool) {
	rt, err := c.teamRoute(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return store.Route{}, views.RouteEdit{}, false
	}
	return rt, c.routeEdit(r.Context(), rt), true
}

// addRouteTarget spreads the route over one more upstream (tollgate admin add-target).
func (c *Console) addRouteTarget(w http.ResponseWriter, r *http.Request) {
	c.changeRouteTarget(w, r, true)
}

// removeRouteTarget takes an upstream off the route (tollgate admin remove-target).
func (c *Console) removeRouteTarget(w http.ResponseWriter, r *http.Request) {
	c.changeRouteTarget(w, r, false)
}

func (c *Console) changeRouteTarget(w http.ResponseWriter, r *http.Request, add bool) {
	form, err := readForm(w, r, "upstream", "credential_env")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rt, vm, ok := c.pathRoute(w, r)
	if !ok {
		return
	}
	v := viewerFrom(r.Context())
	target := store.RouteTarget{UpstreamURL: strings.TrimSpace(form.Get("upstream")), CredentialEnv: strings.TrimSpace(form.Get("credential_env"))}
	if add {
		err = c.st.AddRouteTarget(r.Context(), v.actor(), v.team.ID, rt.Prefix, target)
	} else {
		err = c.st.RemoveRouteTarget(r.Context(), v.actor(), v.team.ID, rt.Prefix, target)
	}
	msg := validation(err)
	if add && errors.Is(err, store.ErrConflict) {
		msg = "The route already sends traffic there."
	}
	if msg != "" {
		vm.NewTarget, vm.TargetError = views.RouteTargetRow{Upstream: target.UpstreamURL, CredentialEnv: target.CredentialEnv}, msg
		c.render(w, r, http.StatusUnprocessableEntity, views.RouteEditPage(vm))
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, routeURL(rt.ID)+"#targets", http.StatusSeeOther)
}

// setRouteResilience sets the route's attempts and health probe path
// (tollgate admin set-route).
func (c *Console) setRouteResilience(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "attempts", "health_path")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rt, vm, ok := c.pathRoute(w, r)
	if !ok {
		return
	}
	v := viewerFrom(r.Context())
	healthPath := strings.TrimSpace(form.Get("health_path"))
	attempts, err := strconv.Atoi(strings.TrimSpace(form.Get("attempts")))
	msg := "Attempts must be a whole number from 1 to 5."
	if err == nil {
		_, err = c.st.SetRouteResilience(r.Context(), v.actor(), v.team.ID, rt.Prefix, attempts, healthPath)
		msg = validation(err)
	}
	if msg != "" {
		vm.Attempts, vm.HealthPath, vm.ResilienceErr = form.Get("attempts"), healthPath, msg
		c.render(w, r, http.StatusUnprocessableEntity, views.RouteEditPage(vm))
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, routeURL(rt.ID)+"?saved#resilience", http.StatusSeeOther)
}

// deleteRoute removes the route after a confirmation.
func (c *Console) deleteRoute(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rt, _, ok := c.pathRoute(w, r)
	if !ok {
		return
	}
	v := viewerFrom(r.Context())
	if form.Get("confirm") != "yes" {
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabRoutes), Title: "Delete route " + rt.Prefix + "?",
			Message: "The gateway stops serving " + rt.Prefix + " at once, for every member; calls to it are answered 404. This cannot be undone.",
			Action:  r.URL.Path, Button: "Delete route", Cancel: routeURL(rt.ID)}))
		return
	}
	if _, err := c.st.DeleteRoute(r.Context(), v.actor(), v.team.ID, rt.ID); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/routes", http.StatusSeeOther)
}

func (c *Console) renderRouteEdit(w http.ResponseWriter, r *http.Request, status int, rt store.Route, form views.RouteForm) {
	vm := c.routeEdit(r.Context(), rt)
	form.Action, form.Credentials = vm.Form.Action, vm.Form.Credentials
	vm.Form = form
	c.render(w, r, status, views.RouteEditPage(vm))
}

func (c *Console) updateRoute(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, routeFields...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	rt, err := c.teamRoute(ctx, chi.URLParam(r, "id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	_, err = c.st.UpdateRoute(ctx, v.actor(), rt.ID, routeSpec(v.team.ID, form))
	if msg := routeError(err); msg != "" {
		c.renderRouteEdit(w, r, http.StatusUnprocessableEntity, rt, routeForm(form, msg))
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/routes", http.StatusSeeOther)
}

// teamRoute finds a route of the viewer's team by id.
func (c *Console) teamRoute(ctx context.Context, id string) (store.Route, error) {
	routes, err := c.st.Routes(ctx, viewerFrom(ctx).team.ID)
	if err != nil {
		return store.Route{}, err
	}
	i := slices.IndexFunc(routes, func(rt store.Route) bool { return strconv.FormatInt(rt.ID, 10) == id })
	if i < 0 {
		return store.Route{}, store.ErrNotFound
	}
	return routes[i], nil
}

func routeSpec(teamID int64, form url.Values) store.RouteSpec {
	return store.RouteSpec{TeamID: teamID, Prefix: form.Get("prefix"), UpstreamURL: form.Get("upstream"),
		Dialect: form.Get("dialect"), CredentialHeader: form.Get("header"), CredentialEnv: form.Get("credential_env"),
		CredentialFormat: form.Get("format"), FailMode: form.Get("fail_mode")}
}

// routeForm refills the form as it was posted, with msg.
func routeForm(form url.Values, msg string) views.RouteForm {
	return views.RouteForm{Preset: form.Get("preset"), Prefix: form.Get("prefix"), Upstream: form.Get("upstream"),
		Dialect: form.Get("dialect"), Header: form.Get("header"), CredentialEnv: form.Get("credential_env"),
		Format: form.Get("format"), FailMode: form.Get("fail_mode"), Error: msg}
}

func routeError(err error) string {
	if errors.Is(err, store.ErrConflict) {
		return "The team already has a route with that prefix."
	}
	return validation(err)
}
