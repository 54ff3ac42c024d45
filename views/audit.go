package views

// Audit is the team's audit log, newest first.
type Audit struct {
	Nav  Nav
	Rows []AuditRow
}

// AuditRow is one recorded change.
type AuditRow struct {
	At     string
	Actor  string
	Action string
	Target string
	Detail string // the change as JSON, if recorded
}

// Confirm asks before a destructive or changing action when JavaScript is off
// (with JavaScript, hx-confirm asks and the page never shows).
type Confirm struct {
	Nav     Nav
	Title   string
	Message string
	Action  string
	Fields  map[string]string // posted again, with confirm=yes
	Button  string
	Cancel  string
	Primary bool // a change rather than a destruction: the button is not red
}
