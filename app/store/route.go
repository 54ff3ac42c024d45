package store

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/netguard"
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
	MaxAttempts      int       `json:"max_attempts"`
	HealthPath       string    `json:"health_path"`
	CreatedAt        time.Time `json:"created_at"`
	// Targets beyond the route's own upstream, in the order they were added.
	Targets []RouteTarget `json:"targets,omitempty"`
	// Disabled says why the gateway does not serve the route ("" when it
	// does): it breaks the deployment's credential grants, for example a
	// route stored before the grant was narrowed.
	Disabled string `json:"disabled,omitempty"`
}

// RouteTarget is one more upstream a route spreads over.
type RouteTarget struct {
	UpstreamURL   string `json:"upstream_url"`
	CredentialEnv string `json:"credential_env"` // "" uses the route's
}

func routeFrom(r db.Route) Route {
	return Route{ID: r.ID, TeamID: r.TeamID, Prefix: r.Prefix, UpstreamURL: r.UpstreamUrl, Dialect: r.Dialect,
		CredentialHeader: r.CredentialHeader, CredentialEnv: r.CredentialEnv, CredentialFormat: r.CredentialFormat,
		FailMode: r.FailMode, MaxAttempts: int(r.MaxAttempts), HealthPath: r.HealthPath, CreatedAt: r.CreatedAt}
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
	// The same rule as the health_path column's check.
	healthPathPattern = regexp.MustCompile(`^/[A-Za-z0-9._~/-]*$`)
)

// reservedPrefixes belong to the gateway itself.
var reservedPrefixes = []string{"/console", "/static", "/api", "/favicon.ico", "/healthz", "/readyz", "/metrics"}

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

func (spec RouteSpec) validate(ctx context.Context, outbound *netguard.Guard) error {
	for _, f := range []struct{ field, what, value string }{{"prefix", "prefix", spec.Prefix},
		{"upstream", "upstream URL", spec.UpstreamURL}, {"format", "credential format", spec.CredentialFormat}} {
		if err := checkText(f.field, f.what, f.value); err != nil {
			return err
		}
	}
	if !routePrefix.MatchString(spec.Prefix) {
		return invalid("prefix", "prefix %q must look like /name or /name/sub (lower-case letters, digits, . _ -)", spec.Prefix)
	}
	for _, r := range reservedPrefixes {
		if spec.Prefix == r || strings.HasPrefix(spec.Prefix, r+"/") {
			return invalid("prefix", "prefix %s is reserved for the gateway", r)
		}
	}
	if _, err := proxy.ValidateUpstream(ctx, outbound, spec.UpstreamURL); err != nil {
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
func (spec RouteSpec) complete(ctx context.Context, outbound *netguard.Guard) (RouteSpec, error) {
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
	return spec, spec.validate(ctx, outbound)
}

// AddRoute creates a route after checking it, including that the outbound guard
// would let the gateway call its upstream.
func (s *Store) AddRoute(ctx context.Context, actor Actor, spec RouteSpec) (Route, error) {
	spec, err := spec.complete(ctx, s.outbound)
	if err != nil {
		return Route{}, err
	}
	var r Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.checkGrants(ctx, tx, spec.TeamID, spec.CredentialEnv, spec.UpstreamURL, nil); err != nil {
			return err
		}
		row, err := s.q.RouteCreate(ctx, tx, db.RouteCreateParams{TeamID: spec.TeamID, Prefix: spec.Prefix,
			UpstreamUrl: spec.UpstreamURL, Dialect: spec.Dialect, CredentialHeader: spec.CredentialHeader,
			CredentialEnv: spec.CredentialEnv, CredentialFormat: spec.CredentialFormat, FailMode: spec.FailMode})
		if err != nil {
			return mapErr(err)
		}
		r = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &spec.TeamID, action: ActionRouteAdd, target: r.Prefix, after: r})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: add route %s: %w", spec.Prefix, err)
	}
	return r, nil
}

// UpdateRoute replaces a route's settings with spec, checked as AddRoute checks them.
func (s *Store) UpdateRoute(ctx context.Context, actor Actor, routeID int64, spec RouteSpec) (Route, error) {
	spec, err := spec.complete(ctx, s.outbound)
	if err != nil {
		return Route{}, err
	}
	var r Route
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.q.RouteGetByID(ctx, tx, db.RouteGetByIDParams{TeamID: spec.TeamID, ID: routeID})
		if err != nil {
			return mapErr(err)
		}
		targets, err := s.routeTargets(ctx, tx, spec.TeamID, routeID)
		if err != nil {
			return err
		}
		if err := s.checkGrants(ctx, tx, spec.TeamID, spec.CredentialEnv, spec.UpstreamURL, targets); err != nil {
			return err
		}
		row, err := s.q.RouteUpdate(ctx, tx, db.RouteUpdateParams{TeamID: spec.TeamID, ID: routeID, Prefix: spec.Prefix,
			UpstreamUrl: spec.UpstreamURL, Dialect: spec.Dialect, CredentialHeader: spec.CredentialHeader,
			CredentialEnv: spec.CredentialEnv, CredentialFormat: spec.CredentialFormat, FailMode: spec.FailMode})
		if err != nil {
			return mapErr(err)
		}
		r = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &spec.TeamID, action: ActionRouteUpdate, target: r.Prefix, before: routeFrom(before), after: r})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: update route %d: %w", routeID, err)
	}
	return r, nil
}

// DeleteRoute removes a team's route with its targets; the gateway stops
// serving its prefix at the next snapshot. Ledger rows keep the route's id.
func (s *Store) DeleteRoute(ctx context.Context, actor Actor, teamID, routeID int64) (Route, error) {
	var r Route
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.RouteDelete(ctx, tx, db.RouteDeleteParams{TeamID: teamID, ID: routeID})
		if err != nil {
			return mapErr(err)
		}
		r = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionRouteDelete, target: r.Prefix, before: r})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: delete route %d: %w", routeID, err)
	}
	return r, nil
}

// checkGrants holds a route's credential and upstream, and each of its
// targets' (a target without a credential of its own carries the route's),
// to the deployment's grants for team teamID. upstream "" checks the targets
// alone.
func (s *Store) checkGrants(ctx context.Context, tx pgx.Tx, teamID int64, env, upstream string, targets []RouteTarget) error {
	team, err := s.q.TeamGetByID(ctx, tx, teamID)
	if err != nil {
		return mapErr(err)
	}
	if problem := grantProblem(s.grants, team.Name, env, upstream, targets); problem != nil {
		return invalid(problem.Field, "%s", problem.Message)
	}
	return nil
}

// grantProblem is the first way a route breaks t, or nil.
func grantProblem(t grant.Table, team, env, upstream string, targets []RouteTarget) *grant.Error {
	if upstream != "" {
		if e := t.Check(team, env, upstream); e != nil {
			return e
		}
	}
	for _, tg := range targets {
		if e := t.Check(team, cmp.Or(tg.CredentialEnv, env), tg.UpstreamURL); e != nil {
			return e
		}
	}
	return nil
}

// routeTargets lists one route's extra targets inside tx.
func (s *Store) routeTargets(ctx context.Context, tx pgx.Tx, teamID, routeID int64) ([]RouteTarget, error) {
	rows, err := s.q.RouteTargetList(ctx, tx, teamID)
	if err != nil {
		return nil, err
	}
	var out []RouteTarget
	for _, t := range rows {
		if t.RouteID == routeID {
			out = append(out, RouteTarget{UpstreamURL: t.UpstreamUrl, CredentialEnv: t.CredentialEnv})
		}
	}
	return out, nil
}

// Routes lists a team's routes with their extra targets, each marked
// Disabled when it breaks the deployment's credential grants.
func (s *Store) Routes(ctx context.Context, teamID int64) ([]Route, error) {
	team, err := s.q.TeamGetByID(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list routes: %w", mapErr(err))
	}
	rows, err := s.q.RouteList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list routes: %w", err)
	}
	targetRows, err := s.q.RouteTargetList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list route targets: %w", err)
	}
	targets := make(map[int64][]RouteTarget)
	for _, t := range targetRows {
		targets[t.RouteID] = append(targets[t.RouteID], RouteTarget{UpstreamURL: t.UpstreamUrl, CredentialEnv: t.CredentialEnv})
	}
	routes := make([]Route, len(rows))
	for i, r := range rows {
		routes[i] = routeFrom(r)
		routes[i].Targets = targets[r.ID]
		if problem := grantProblem(s.grants, team.Name, r.CredentialEnv, r.UpstreamUrl, targets[r.ID]); problem != nil {
			routes[i].Disabled = problem.Message
		}
	}
	return routes, nil
}

// routeByPrefix finds a team's route inside tx.
func (s *Store) routeByPrefix(ctx context.Context, tx pgx.Tx, teamID int64, prefix string) (db.Route, error) {
	rows, err := s.q.RouteList(ctx, tx, teamID)
	if err != nil {
		return db.Route{}, err
	}
	for _, r := range rows {
		if r.Prefix == prefix {
			return r, nil
		}
	}
	return db.Route{}, ErrNotFound
}

// AddRouteTarget spreads a route over one more upstream, checked as a route's
// own upstream is; credentialEnv "" uses the route's credential variable.
func (s *Store) AddRouteTarget(ctx context.Context, actor Actor, teamID int64, prefix string, target RouteTarget) error {
	if err := checkText("upstream", "upstream URL", target.UpstreamURL); err != nil {
		return err
	}
	if _, err := proxy.ValidateUpstream(ctx, s.outbound, target.UpstreamURL); err != nil {
		return invalid("upstream", "%v", err)
	}
	if target.CredentialEnv != "" && !proxy.CredentialEnvAllowed(target.CredentialEnv) {
		return invalid("credential_env", "credential variable %q must be ANTHROPIC_API_KEY, OPENAI_API_KEY or TOLLGATE_CREDENTIAL_<NAME>", target.CredentialEnv)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.routeByPrefix(ctx, tx, teamID, prefix)
		if err != nil {
			return err
		}
		// The route's own variable is spelled "", so one target cannot be listed twice.
		if target.CredentialEnv == r.CredentialEnv {
			target.CredentialEnv = ""
		}
		if target.CredentialEnv != "" && r.CredentialHeader == "" {
			return invalid("credential_env", "route %s injects no credential, so its targets cannot carry one", prefix)
		}
		if target.UpstreamURL == r.UpstreamUrl && (target.CredentialEnv == "" || target.CredentialEnv == r.CredentialEnv) {
			return ErrConflict
		}
		if err := s.checkGrants(ctx, tx, teamID, r.CredentialEnv, "", []RouteTarget{target}); err != nil {
			return err
		}
		existing, err := s.q.RouteTargetList(ctx, tx, teamID)
		if err != nil {
			return err
		}
		n := 1 // the route's own upstream
		for _, t := range existing {
			if t.RouteID == r.ID {
				n++
			}
		}
		if n >= proxy.MaxTargets {
			return invalid("upstream", "route %s already has %d targets, the most a route may have", prefix, n)
		}
		if _, err := s.q.RouteTargetAdd(ctx, tx, db.RouteTargetAddParams{TeamID: teamID, RouteID: r.ID,
			UpstreamUrl: target.UpstreamURL, CredentialEnv: target.CredentialEnv}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionRouteTargetAdd, target: prefix, after: target})
	})
	if err != nil {
		return fmt.Errorf("store: add target to route %s: %w", prefix, err)
	}
	return nil
}

// RemoveRouteTarget takes an added target off a route.
func (s *Store) RemoveRouteTarget(ctx context.Context, actor Actor, teamID int64, prefix string, target RouteTarget) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		r, err := s.routeByPrefix(ctx, tx, teamID, prefix)
		if err != nil {
			return err
		}
		if target.CredentialEnv == r.CredentialEnv {
			target.CredentialEnv = ""
		}
		if _, err := s.q.RouteTargetRemove(ctx, tx, db.RouteTargetRemoveParams{TeamID: teamID, RouteID: r.ID,
			UpstreamUrl: target.UpstreamURL, CredentialEnv: target.CredentialEnv}); err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionRouteTargetRemove, target: prefix, before: target})
	})
	if err != nil {
		return fmt.Errorf("store: remove target from route %s: %w", prefix, err)
	}
	return nil
}

// SetRouteResilience sets how many attempts an idempotent request may make
// (1 to 5, the first included) and which path health probes GET ("" for none).
func (s *Store) SetRouteResilience(ctx context.Context, actor Actor, teamID int64, prefix string, maxAttempts int, healthPath string) (Route, error) {
	if maxAttempts < 1 || maxAttempts > 5 {
		return Route{}, invalid("max_attempts", "attempts must be from 1 to 5, not %d", maxAttempts)
	}
	if healthPath != "" && !healthPathPattern.MatchString(healthPath) {
		return Route{}, invalid("health_path", "health path %q must start with / and hold only letters, digits and . _ ~ / -", healthPath)
	}
	var out Route
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := s.routeByPrefix(ctx, tx, teamID, prefix)
		if err != nil {
			return err
		}
		row, err := s.q.RouteSetResilience(ctx, tx, db.RouteSetResilienceParams{TeamID: teamID, ID: before.ID,
			MaxAttempts: int32(maxAttempts), HealthPath: healthPath})
		if err != nil {
			return mapErr(err)
		}
		out = routeFrom(row)
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionRouteResilience, target: prefix, before: routeFrom(before), after: out})
	})
	if err != nil {
		return Route{}, fmt.Errorf("store: set resilience of route %s: %w", prefix, err)
	}
	return out, nil
}
