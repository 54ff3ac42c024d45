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
}

// RouteEdit is the page editing one route.
type RouteEdit struct {
	Nav  Nav
	Form RouteForm
}
