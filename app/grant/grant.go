// Package grant says which provider credential in the gateway's environment
// each team may use, and the only hosts it may be sent to. The deployment
// decides this, not a team: on a gateway several teams share, a team owner
// must not be able to point a route holding another team's (or the
// deployment's) key at a server of their own and read the key from the
// request. Every route writer checks a route against the table, and the
// snapshot loader disables a stored route that breaks it.
package grant

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Credential is one variable a route may inject, where to and for whom.
type Credential struct {
	Env string
	// Hosts it may be sent to: a lower-case host name or IP, optionally with
	// :port (then only that port).
	Hosts []string
	// Teams, by name, that may use it; nil for every team.
	Teams []string
}

// Table holds the deployment's grants, keyed by variable name.
type Table struct {
	creds map[string]Credential
}

// Presets are what a deployment gets without saying anything: each well-known
// provider key goes only to its provider's API host, for every team. A
// one-team deployment needs no configuration.
var Presets = []Credential{
	{Env: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com"}},
	{Env: "OPENAI_API_KEY", Hosts: []string{"api.openai.com"}},
}

// Default is the table of a deployment that declares no grants.
func Default() Table {
	t, err := Parse("")
	if err != nil {
		panic(err) // the presets always parse
	}
	return t
}

var (
	envName  = regexp.MustCompile(`^(ANTHROPIC_API_KEY|OPENAI_API_KEY|TOLLGATE_CREDENTIAL_[A-Z0-9_]+)$`)
	teamName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// Parse reads CREDENTIAL_GRANTS: grants separated by ";" or new lines, each
//
//	VARIABLE: hosts=HOST[,HOST...] [teams=TEAM[,TEAM...]]
//
// e.g. "TOLLGATE_CREDENTIAL_VLLM: hosts=vllm.internal:8000 teams=research".
// A grant of ANTHROPIC_API_KEY or OPENAI_API_KEY replaces its preset (to
// narrow the teams, or to send it through an egress proxy). Without teams=,
// every team may use the credential. Every problem is reported at once.
func Parse(spec string) (Table, error) {
	t := Table{creds: map[string]Credential{}}
	for _, p := range Presets {
		t.creds[p.Env] = p
	}
	var errs []string
	seen := map[string]bool{}
	for _, raw := range strings.FieldsFunc(spec, func(r rune) bool { return r == ';' || r == '\n' }) {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		c, err := parseOne(raw)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if seen[c.Env] {
			errs = append(errs, fmt.Sprintf("%s is granted twice; put its hosts and teams in one grant", c.Env))
			continue
		}
		seen[c.Env] = true
		t.creds[c.Env] = c
	}
	if len(errs) > 0 {
		return Table{}, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return t, nil
}

func parseOne(raw string) (Credential, error) {
	name, rest, ok := strings.Cut(raw, ":")
	name = strings.TrimSpace(name)
	if !ok {
		return Credential{}, fmt.Errorf("grant %q must look like VARIABLE: hosts=HOST[,HOST] [teams=TEAM[,TEAM]]", raw)
	}
	if !envName.MatchString(name) {
		return Credential{}, fmt.Errorf("%q is not a credential variable: use ANTHROPIC_API_KEY, OPENAI_API_KEY or TOLLGATE_CREDENTIAL_<NAME>", name)
	}
	c := Credential{Env: name}
	for _, field := range strings.Fields(rest) {
		key, list, ok := strings.Cut(field, "=")
		if !ok || list == "" {
			return Credential{}, fmt.Errorf("%s: %q must be hosts=... or teams=...", name, field)
		}
		values := strings.Split(list, ",")
		switch key {
		case "hosts":
			for _, h := range values {
				h = strings.ToLower(h)
				if err := checkHost(h); err != nil {
					return Credential{}, fmt.Errorf("%s: %w", name, err)
				}
				c.Hosts = append(c.Hosts, h)
			}
		case "teams":
			for _, team := range values {
				if !teamName.MatchString(team) {
					return Credential{}, fmt.Errorf("%s: %q is not a team name (lower-case letters, digits and -)", name, team)
				}
				c.Teams = append(c.Teams, team)
			}
		default:
			return Credential{}, fmt.Errorf("%s: unknown setting %q; use hosts= and teams=", name, key)
		}
	}
	if len(c.Hosts) == 0 {
		return Credential{}, fmt.Errorf("%s: name the hosts it may be sent to with hosts=", name)
	}
	return c, nil
}

// checkHost accepts "name" or "name:port", nothing with a scheme, path or
// wildcard: a grant names exactly where a key may go.
func checkHost(h string) error {
	host := h
	if strings.Contains(h, ":") && !strings.HasSuffix(h, "]") {
		var port string
		var err error
		host, port, err = net.SplitHostPort(h)
		if err != nil || port == "" || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("host %q must be a host name or IP, optionally with :port", h)
		}
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.ContainsAny(host, "/*@?#= ") {
		return fmt.Errorf("host %q must be a host name or IP, optionally with :port", h)
	}
	return nil
}

// Lookup returns the grant of variable env.
func (t Table) Lookup(env string) (Credential, bool) {
	c, ok := t.creds[env]
	return c, ok
}

// ForTeam lists the credentials team may use, sorted by variable name: what
// the console offers that team's owners.
func (t Table) ForTeam(team string) []Credential {
	var out []Credential
	for _, c := range t.creds {
		if c.allows(team) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Credential) int { return strings.Compare(a.Env, b.Env) })
	return out
}

func (c Credential) allows(team string) bool {
	return c.Teams == nil || slices.Contains(c.Teams, team)
}

// sends reports whether c may go to u's host (and port, if the grant names one).
func (c Credential) sends(u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, h := range c.Hosts {
		gh, gp := h, ""
		if strings.Contains(h, ":") && !strings.HasSuffix(h, "]") {
			gh, gp, _ = net.SplitHostPort(h)
		}
		if strings.Trim(gh, "[]") == host && (gp == "" || gp == port) {
			return true
		}
	}
	return false
}

// Error says why a route may not use a credential; Field names the form
// field at fault (credential_env or upstream).
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Check says whether team may send the credential in env to upstream. An
// empty env (a route that injects nothing) is always allowed.
func (t Table) Check(team, env, upstream string) *Error {
	if env == "" {
		return nil
	}
	c, ok := t.creds[env]
	if !ok {
		return &Error{Field: "credential_env", Message: fmt.Sprintf(
			"credential %s is not granted by this deployment: its operator must declare it in CREDENTIAL_GRANTS with the hosts it may be sent to", env)}
	}
	if !c.allows(team) {
		return &Error{Field: "credential_env", Message: fmt.Sprintf("credential %s is not granted to team %s", env, team)}
	}
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return &Error{Field: "upstream", Message: fmt.Sprintf("upstream %q is not a URL", upstream)}
	}
	if !c.sends(u) {
		return &Error{Field: "upstream", Message: fmt.Sprintf("credential %s may only be sent to %s, not to %s",
			env, strings.Join(c.Hosts, ", "), u.Host)}
	}
	return nil
}
