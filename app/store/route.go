package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/proxy"
)

// Route maps a team's path prefix to an upstream.
type Route struct {
	ID               int64     `json:"id"`
	TeamID           int64     `json:"team_id"`
	Prefix           string    `json:"prefix"`
	UpstreamURL      string    `json:"upstream_url"`
	Dialect          string    `json:"dialect"`
	CredentialHeader string    `json:"credential_header"`
	CredentialEnv    string    `json:"credential_env"`
	CredentialFormat string    `json:"credential_format"`
	FailMode         string    `json:"fail_mode"`
	CreatedAt        time.Time `json:"created_at"`
}

func routeFrom(r db.Route) Route {
	return Route{ID: r.ID, TeamID: r.TeamID, Prefix: r.Prefix, UpstreamURL: r.UpstreamUrl, Dialect: r.Dialect,
		CredentialHeader: r.CredentialHeader, CredentialEnv: r.CredentialEnv, CredentialFormat: r.CredentialFormat,
		FailMode: r.FailMode, CreatedAt: r.CreatedAt}
}

// RouteSpec is what an owner fills in; Preset fills the blanks it leaves.
type RouteSpec struct {
	TeamID           int64
	Preset           string // "anthropic", "openai" or "" (generic)
	Prefix           string
	UpstreamURL      string
	Dialect          string
	CredentialHeader string
	CredentialEnv    string
	CredentialFormat string
	FailMode         string
}

// Presets are the routes a team usually wants, ready to use with the official SDKs.
var Presets = map[string]RouteSpec{
	"anthropic": {Prefix: "/anthropic", UpstreamURL: "https://api.anthropic.com", Dialect: "anthropic",
		CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY", CredentialFormat: "{}", FailMode: "closed"},
	"openai": {Prefix: "/openai", UpstreamURL: "https://api.openai.com", Dialect: "openai",
		CredentialHeader: "Authorization", CredentialEnv: "OPENAI_API_KEY", CredentialFormat: "Bearer {}", FailMode: "closed"},
}

var (
	routePrefix = regexp.MustCompile(`^(/[a-z0-9][a-z0-9._-]*)+$`)
	headerName  = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
)

// reservedPrefixes belong to the gateway itself.
var reservedPrefixes = []string{"/console", "/static", "/healthz", "/readyz", "/metrics"}

// withPreset fills the fields the spec leaves blank from its preset.
func (spec RouteSpec) withPreset() (RouteSpec, error) {
	if spec.Preset == "" {
		return spec, nil
	}
	p, ok := Presets[spec.Preset]
	if !ok {
		return spec, invalid("preset", "unknown preset %q; use anthropic, openai, or none for a generic route", spec.Preset)
	}
	fill := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	fill(&spec.Prefix, p.Prefix)
	fill(&spec.UpstreamURL, p.UpstreamURL)
	fill(&spec.Dialect, p.Dialect)
	fill(&spec.CredentialHeader, p.CredentialHeader)
	fill(&spec.CredentialEnv, p.CredentialEnv)
	fill(&spec.CredentialFormat, p.CredentialFormat)
	fill(&spec.FailMode, p.FailMode)
	return spec, nil
}

func (spec RouteSpec) validate(ctx context.Context) error {
	if !routePrefix.MatchString(spec.Prefix) {
		return invalid("prefix", "prefix %q must look like /name or /name/sub (lower-case letters, digits, . _ -)", spec.Prefix)
	}
	for _, r := range reservedPrefixes {
		if spec.Prefix == r || strings.HasPrefix(spec.Prefix, r+"/") {
			return invalid("prefix", "prefix %s is reserved for the gateway", r)
		}
	}
	if _, err := proxy.ValidateUpstream(ctx, spec.UpstreamURL); err != nil {
		return invalid("upstream", "%v", err)
	}
	switch spec.Dialect {
	case "anthropic", "openai", "generic":
	default:
		return invalid("dialect", "dialect must be anthropic, openai or generic, not %q", spec.Dialect)
	}
	if spec.CredentialHeader != "" {
		if !headerName.MatchString(spec.CredentialHeader) {
			return invalid("header", "%q is not a valid header name", spec.CredentialHeader)
		}
		if !proxy.CredentialEnvAllowed(spec.CredentialEnv) {
			return invalid("credential_env", "credential variable %q must be ANTHROPIC_API_KEY, OPENAI_API_KEY or TOLLGATE_CREDENTIAL_<NAME>", spec.CredentialEnv)
		}
		if strings.Count(spec.CredentialFormat, "{}") != 1 {
			return invalid("format", "credential format %q must contain {} exactly once", spec.CredentialFormat)
		}
	}
	if spec.CredentialHeader == "" && spec.CredentialEnv != "" {
		return invalid("credential_env", "credential variable %q needs a header to inject it into", spec.CredentialEnv)
	}
	if spec.FailMode != "closed" && spec.FailMode != "open" {
		return invalid("fail_mode", "fail mode must be closed or open, not %q", spec.FailMode)
	}
	return nil
}

// complete fills a spec from its preset and defaults, then checks it.
func (spec RouteSpec) complete(ctx context.Context) (RouteSpec, error) {
	spec, err := spec.withPreset()
	if err != nil {
		return spec, err
	}
	if spec.CredentialFormat == "" {
		spec.CredentialFormat = "{}"
	}
	if spec.FailMode == "" {
		spec.FailMode = "closed"
	}
	return spec, spec.validate(ctx)
}

// AddRoute creates a route after checking it, including that its upstream is not
// a link-local or metadata address.
func (s *Store) AddRoute(ctx context.Context, actor Actor, spec RouteSpec) (Route, error) {
	spec, err := spec.complete(ctx)
	if err != nil {
		return Route{}, err
	}
	var r Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.RouteCreate(ctx, tx, db.RouteCreateParams{TeamID: spec.TeamID, Prefix: spec.Prefix,
			UpstreamUrl: spec.UpstreamURL, Dialect: spec.Dialect, CredentialHeader: spec.CredentialHeader,
			CredentialEnv: spec.CredentialEnv, CredentialFormat: spec.CredentialFormat, FailMode: spec.FailMode})
		if err != nil {
			return mapErr(err)
		}
		r = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &spec.TeamID, action: "route.add", target: r.Prefix, after: r})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: add route %s: %w", spec.Prefix, err)
	}
	return r, nil
}

// UpdateRoute replaces a route's settings with spec, checked as AddRoute checks them.
func (s *Store) UpdateRoute(ctx context.Context, actor Actor, routeID int64, spec RouteSpec) (Route, error) {
	spec, err := spec.complete(ctx)
	if err != nil {
		return Route{}, err
	}
	var r Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.RouteGetByID(ctx, tx, db.RouteGetByIDParams{TeamID: spec.TeamID, ID: routeID})
		if err != nil {
			return mapErr(err)
		}
		row, err := s.q.RouteUpdate(ctx, tx, db.RouteUpdateParams{TeamID: spec.TeamID, ID: routeID, Prefix: spec.Prefix,
			UpstreamUrl: spec.UpstreamURL, Dialect: spec.Dialect, CredentialHeader: spec.CredentialHeader,
			CredentialEnv: spec.CredentialEnv, CredentialFormat: spec.CredentialFormat, FailMode: spec.FailMode})
		if err != nil {
			return mapErr(err)
		}
		r = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &spec.TeamID, action: "route.update", target: r.Prefix, before: routeFrom(before), after: r})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: update route %d: %w", routeID, err)
	}
	return r, nil
}

// Routes lists a team's routes.
func (s *Store) Routes(ctx context.Context, teamID int64) ([]Route, error) {
	rows, err := s.q.RouteList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list routes: %w", err)
	}
	routes := make([]Route, len(rows))
	for i, r := range rows {
		routes[i] = routeFrom(r)
	}
	return routes, nil
}
