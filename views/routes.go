package views

// Routes is the owner's list of routes with the form to add one.
type Routes struct {
	Nav  Nav
	Rows []RouteRow
	Form RouteForm
}

// RouteRow is one route. CredentialSet says whether the gateway's environment
// holds the credential variable; the value itself never reaches a view.
type RouteRow struct {
	ID            int64
	Prefix        string
	Upstream      string
	Dialect       string
	Header        string
	CredentialEnv string
	CredentialSet bool
	FailMode      string
	EditURL       string
	// Targets are the upstreams added beside Upstream (tollgate admin add-target).
	Targets     []RouteTargetRow
	MaxAttempts int
	HealthPath  string // "" when probes are off
	// Disabled says why the gateway refuses the route's requests; "" when served.
	Disabled string
}

// Credential is a credential variable the team may use, and where it may go.
type Credential struct {
	Env   string
	Hosts string // "api.anthropic.com, eu.example.com"
}

// RouteTargetRow is one more upstream of a route, with its own credential variable.
type RouteTargetRow struct {
	Upstream      string
	CredentialEnv string
	CredentialSet bool
}

// RouteForm adds a route (from a preset) or edits one.
type RouteForm struct {
	Action        string
	Add           bool // adding: offer presets, blanks are filled from the preset
	Preset        string
	Prefix        string
	Upstream      string
	Dialect       string
	Header        string
	CredentialEnv string
	Format        string
	FailMode      string
	Error         string
	// Credentials are the variables the deployment grants this team: the
	// only ones the form offers.
	Credentials []Credential
}

// RouteEdit is the page editing one route: its settings, the upstreams it
// spreads over, its retries and health probes, and deleting it.
type RouteEdit struct {
	Nav        Nav
	Form       RouteForm
	Upstream   string // the route's own upstream, always its first target
	Credential bool   // the route injects a credential, so a target may carry its own variable
	Targets    []RouteTargetRow
	// TargetsURL takes a new target (upstream, credential_env);
	// TargetsURL+"/remove" takes one off.
	TargetsURL      string
	Credentials     []Credential // the team's granted variables, for a target's own
	NewTarget       RouteTargetRow
	TargetError     string
	ResilienceURL   string
	Attempts        string
	HealthPath      string
	ResilienceErr   string
	DeleteURL       string
	ResilienceSaved bool
}

// granted reports whether env is among creds.
func granted(env string, creds []Credential) bool {
	for _, c := range creds {
		if c.Env == env {
			return true
		}
	}
	return false
}
