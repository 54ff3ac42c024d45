package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Owner pages for routes: list, add from a preset, edit. Whether a route's
// credential variable is set is shown; its value never is.

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
			FailMode: rt.FailMode, EditURL: Prefix + "/routes/" + strconv.FormatInt(rt.ID, 10),
			MaxAttempts: rt.MaxAttempts, HealthPath: rt.HealthPath})
		row := &vm.Rows[len(vm.Rows)-1]
		for _, tg := range rt.Targets {
			env := cmp.Or(tg.CredentialEnv, rt.CredentialEnv)
			row.Targets = append(row.Targets, views.RouteTargetRow{Upstream: tg.UpstreamURL, CredentialEnv: env, CredentialSet: c.getenv(env) != ""})
		}
	}
	form.Action, form.Add = Prefix+"/routes", true
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
	form := views.RouteForm{Prefix: rt.Prefix, Upstream: rt.UpstreamURL, Dialect: rt.Dialect, Header: rt.CredentialHeader,
		CredentialEnv: rt.CredentialEnv, Format: rt.CredentialFormat, FailMode: rt.FailMode}
	c.renderRouteEdit(w, r, http.StatusOK, form)
}

func (c *Console) renderRouteEdit(w http.ResponseWriter, r *http.Request, status int, form views.RouteForm) {
	form.Action = r.URL.Path
	c.render(w, r, status, views.RouteEditPage(views.RouteEdit{Nav: nav(viewerFrom(r.Context()), views.TabRoutes), Form: form}))
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
		c.renderRouteEdit(w, r, http.StatusUnprocessableEntity, routeForm(form, msg))
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
