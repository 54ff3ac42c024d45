package proxy

import (
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// Snapshot is an immutable view of the config the data path needs: keys, members
// and routes. Replicas swap a whole new Snapshot in atomically; nothing in it is
// ever modified after NewSnapshot returns.
type Snapshot struct {
	keys    map[string]Key
	teams   map[int64]Team
	members map[int64]Member
	routes  map[int64][]Route // by team, longest prefix first
	// Prices are the model prices holds and costs are computed from.
	Prices   estimate.Table
	LoadedAt time.Time
}

// Key is a member key as the gateway sees it: never the plaintext.
type Key struct {
	ID         string
	TeamID     int64
	MemberID   int64
	SecretHash [32]byte
	ExpiresAt  time.Time // zero: no expiry; set by rotation (the grace window's end)
	Revoked    bool
}

// Member is the part of a member the data path checks.
type Member struct {
	ID     int64
	TeamID int64
	// Email names the member in logs.
	Email    string
	Disabled bool
	Limits   limiter.Policy
	// Weight is the member's share of the team's limits in the waiting room, from
	// their tier (1 without one).
	Weight int64
	// FitHolds: a request whose worst case does not fit the budget left has its
	// output cap lowered to fit, rather than being refused (their tier's choice, or
	// the team's for a member without a tier).
	FitHolds bool
}

// Team carries the team-wide limits, which bind on top of each member's.
type Team struct {
	ID     int64
	Name   string // for metric labels and logs: set by the operator, never by a request
	Limits limiter.Policy
}

// Dialect is the provider protocol a route speaks; it picks the error shape.
type Dialect string

// The dialects a route can speak.
const (
	DialectAnthropic Dialect = "anthropic"
	DialectOpenAI    Dialect = "openai"
	DialectGeneric   Dialect = "generic"
)

// Route maps a path prefix of one team to its upstream targets.
type Route struct {
	ID     int64
	TeamID int64
	Prefix string // "/anthropic": matched on whole path segments
	// Targets are the upstreams it spreads over; the first is the route's own,
	// whose path decides which endpoint a request reaches. At most MaxTargets.
	Targets          []Target
	Dialect          Dialect
	CredentialHeader string // header to inject, e.g. x-api-key; "" injects nothing
	CredentialFormat string // e.g. "Bearer {}"
	FailOpen         bool
	// MaxAttempts bounds the attempts of an idempotent request (1: no retry).
	MaxAttempts int
	// HealthPath is GET on each target by the active health probes; "" for none.
	HealthPath string
	// Disabled says why the route is refused without calling any upstream
	// ("" when it is served): it breaks the deployment's credential grants.
	Disabled string
}

// NewSnapshot indexes teams, keys, members and routes.
func NewSnapshot(teams []Team, keys []Key, members []Member, routes []Route, prices estimate.Table, loadedAt time.Time) *Snapshot {
	s := &Snapshot{
		Prices:   prices,
		keys:     make(map[string]Key, len(keys)),
		teams:    make(map[int64]Team, len(teams)),
		members:  make(map[int64]Member, len(members)),
		routes:   make(map[int64][]Route),
		LoadedAt: loadedAt,
	}
	for _, t := range teams {
		s.teams[t.ID] = t
	}
	for _, k := range keys {
		s.keys[k.ID] = k
	}
	for _, m := range members {
		s.members[m.ID] = m
	}
	for _, r := range routes {
		if len(r.Targets) == 0 {
			continue
		}
		r.Targets = r.Targets[:min(len(r.Targets), MaxTargets)]
		r.MaxAttempts = max(r.MaxAttempts, 1)
		s.routes[r.TeamID] = append(s.routes[r.TeamID], r)
	}
	for _, rs := range s.routes {
		sort.Slice(rs, func(i, j int) bool { return len(rs[i].Prefix) > len(rs[j].Prefix) })
	}
	return s
}

// Key returns the key with the given id.
func (s *Snapshot) Key(id string) (Key, bool) {
	k, ok := s.keys[id]
	return k, ok
}

// Team returns the team with the given id.
func (s *Snapshot) Team(id int64) (Team, bool) {
	t, ok := s.teams[id]
	return t, ok
}

// Member returns the member with the given id.
func (s *Snapshot) Member(id int64) (Member, bool) {
	m, ok := s.members[id]
	return m, ok
}

// MatchRoute finds the team's route with the longest prefix that covers
// escapedPath on a segment boundary, and returns the rest of the path (still
// escaped, starting with "/" or empty). Matching the escaped form means an
// encoded "/" (%2F) never splits a segment.
func (s *Snapshot) MatchRoute(teamID int64, escapedPath string) (Route, string, bool) {
	for _, r := range s.routes[teamID] {
		rest, ok := strings.CutPrefix(escapedPath, r.Prefix)
		if ok && (rest == "" || rest[0] == '/') {
			return r, rest, true
		}
	}
	return Route{}, "", false
}

// allRoutes lists every team's routes, for the health probes.
func (s *Snapshot) allRoutes() []Route {
	var out []Route
	for _, rs := range s.routes {
		out = append(out, rs...)
	}
	return out
}

// Source hands out the current snapshot; implementations swap it atomically.
type Source interface {
	Current() *Snapshot
}

// CredentialEnvAllowed says which gateway environment variables a route may
// inject upstream: the two well-known provider keys and any variable the operator
// names TOLLGATE_CREDENTIAL_<NAME>. Anything else (DATABASE_URL, cloud tokens)
// could be sent by a team owner to a host they control, so it is refused when a
// route is saved and again at request time.
func CredentialEnvAllowed(name string) bool {
	if name == "ANTHROPIC_API_KEY" || name == "OPENAI_API_KEY" {
		return true
	}
	rest, ok := strings.CutPrefix(name, "TOLLGATE_CREDENTIAL_")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// TeamMembers lists a team's members; for the rare whole-team work such as
// rebuilding admission counters, not the request path.
func (s *Snapshot) TeamMembers(teamID int64) []Member {
	var out []Member
	for _, m := range s.members {
		if m.TeamID == teamID {
			out = append(out, m)
		}
	}
	return out
}

// RevokedKeys lists the ids of a team's revoked keys, as TeamMembers is used.
func (s *Snapshot) RevokedKeys(teamID int64) []string {
	var out []string
	for _, k := range s.keys {
		if k.TeamID == teamID && k.Revoked {
			out = append(out, k.ID)
		}
	}
	return out
}
