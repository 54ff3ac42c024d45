package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// RoutePath names a route in a path.
type RoutePath struct {
	ID int64 `path:"id" doc:"The route's id."`
}

type routeOut struct{ Body store.Route }

type routesOut struct {
	Body struct {
		Routes []store.Route `json:"routes"`
	}
}

// RouteSpec is a route as an owner describes it; a preset fills what it leaves out.
type RouteSpec struct {
	Preset           string `json:"preset,omitempty" enum:"anthropic,openai" doc:"Fill the blanks from a preset."`
	Prefix           string `json:"prefix,omitempty" example:"/anthropic"`
	UpstreamURL      string `json:"upstream_url,omitempty" example:"https://api.anthropic.com"`
	Dialect          string `json:"dialect,omitempty" enum:"anthropic,openai,generic"`
	CredentialHeader string `json:"credential_header,omitempty" example:"x-api-key"`
	CredentialEnv    string `json:"credential_env,omitempty" example:"ANTHROPIC_API_KEY" doc:"The variable holding the provider key, where the gateway runs."`
	CredentialFormat string `json:"credential_format,omitempty" example:"Bearer {}"`
	FailMode         string `json:"fail_mode,omitempty" enum:"closed,open" doc:"When Redis is unreachable."`
}

func (s RouteSpec) store(teamID int64) store.RouteSpec {
	return store.RouteSpec{TeamID: teamID, Preset: s.Preset, Prefix: s.Prefix, UpstreamURL: s.UpstreamURL, Dialect: s.Dialect,
		CredentialHeader: s.CredentialHeader, CredentialEnv: s.CredentialEnv, CredentialFormat: s.CredentialFormat, FailMode: s.FailMode}
}

type targetIn struct {
	RoutePath
	IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
	Body           struct {
		UpstreamURL   string `json:"upstream_url"`
		CredentialEnv string `json:"credential_env,omitempty" doc:"Its own credential variable; absent: the route's."`
	}
}

func (a *API) registerRoutes(h huma.API) {
	huma.Register(h, operation("listRoutes", http.MethodGet, "/routes", AccessRead, 200, "List the team's routes and their targets"),
		func(ctx context.Context, _ *struct{}) (*routesOut, error) {
			routes, err := a.st.Routes(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "route")
			}
			out := &routesOut{}
			out.Body.Routes = routes
			return out, nil
		})
	huma.Register(h, creating(operation("addRoute", http.MethodPost, "/routes", AccessOwner, 201, "Add a route")),
		func(ctx context.Context, in *struct {
			IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
			Body           RouteSpec
		}) (*routeOut, error) {
			r, err := a.st.AddRoute(ctx, actorOf(ctx), in.Body.store(teamOf(ctx)))
			if err != nil {
				return nil, a.fromStore(err, "a route with prefix "+in.Body.Prefix)
			}
			return &routeOut{Body: r}, nil
		})
	huma.Register(h, operation("updateRoute", http.MethodPut, "/routes/{id}", AccessOwner, 200, "Replace a route's settings", 404, 409, 422),
		func(ctx context.Context, in *struct {
			RoutePath
			Body RouteSpec
		}) (*routeOut, error) {
			r, err := a.st.UpdateRoute(ctx, actorOf(ctx), in.ID, in.Body.store(teamOf(ctx)))
			if err != nil {
				return nil, a.fromStore(err, "route")
			}
			return &routeOut{Body: r}, nil
		})
	huma.Register(h, operation("deleteRoute", http.MethodDelete, "/routes/{id}", AccessOwner, 204,
		"Delete a route with its targets: the gateway stops serving its prefix; ledger rows keep the route's id", 404),
		func(ctx context.Context, in *RoutePath) (*struct{}, error) {
			if _, err := a.st.DeleteRoute(ctx, actorOf(ctx), teamOf(ctx), in.ID); err != nil {
				return nil, a.fromStore(err, "route")
			}
			return nil, nil
		})
	huma.Register(h, operation("setRouteResilience", http.MethodPut, "/routes/{id}/resilience", AccessOwner, 200,
		"Set how often idempotent requests are tried and which path health probes use", 404, 422),
		func(ctx context.Context, in *struct {
			RoutePath
			Body struct {
				MaxAttempts int    `json:"max_attempts" minimum:"1" maximum:"5" doc:"Attempts of an idempotent request, the first included."`
				HealthPath  string `json:"health_path,omitempty" doc:"Path the health probes GET on each target; absent: no probes."`
			}
		}) (*routeOut, error) {
			prefix, err := a.routePrefix(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			r, err := a.st.SetRouteResilience(ctx, actorOf(ctx), teamOf(ctx), prefix, in.Body.MaxAttempts, in.Body.HealthPath)
			if err != nil {
				return nil, a.fromStore(err, "route")
			}
			return &routeOut{Body: r}, nil
		})
	huma.Register(h, creating(operation("addRouteTarget", http.MethodPost, "/routes/{id}/targets", AccessOwner, 201,
		"Spread a route over one more upstream", 404)),
		func(ctx context.Context, in *targetIn) (*routeOut, error) {
			prefix, err := a.routePrefix(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			target := store.RouteTarget{UpstreamURL: in.Body.UpstreamURL, CredentialEnv: in.Body.CredentialEnv}
			if err := a.st.AddRouteTarget(ctx, actorOf(ctx), teamOf(ctx), prefix, target); err != nil {
				return nil, a.fromStore(err, "that target on route "+prefix)
			}
			return a.route(ctx, in.ID)
		})
	huma.Register(h, operation("removeRouteTarget", http.MethodDelete, "/routes/{id}/targets", AccessOwner, 200,
		"Take an added target off a route", 404),
		func(ctx context.Context, in *struct {
			RoutePath
			UpstreamURL   string `query:"upstream_url" required:"true"`
			CredentialEnv string `query:"credential_env"`
		}) (*routeOut, error) {
			prefix, err := a.routePrefix(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			target := store.RouteTarget{UpstreamURL: in.UpstreamURL, CredentialEnv: in.CredentialEnv}
			if err := a.st.RemoveRouteTarget(ctx, actorOf(ctx), teamOf(ctx), prefix, target); err != nil {
				return nil, a.fromStore(err, "such target on route "+prefix)
			}
			return a.route(ctx, in.ID)
		})
}

// route is a route of the calling token's team with its targets, or a 404.
func (a *API) route(ctx context.Context, id int64) (*routeOut, error) {
	routes, err := a.st.Routes(ctx, teamOf(ctx))
	if err != nil {
		return nil, a.fromStore(err, "route")
	}
	for _, r := range routes {
		if r.ID == id {
			return &routeOut{Body: r}, nil
		}
	}
	return nil, a.fromStore(store.ErrNotFound, "route")
}

// routePrefix is the prefix the store names a route by.
func (a *API) routePrefix(ctx context.Context, id int64) (string, error) {
	r, err := a.route(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Body.Prefix, nil
}
