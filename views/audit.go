package views

// Audit is one page of the team's audit log, newest first.
type Audit struct {
	Nav     Nav
	Rows    []AuditRow
	Member  string // the member filter: a member id, or "" for everyone
	Action  string // the action filter, or "" for every action
	Members []Option
	Actions []Option
	Older   string // the next page's address; "" on the last page
	Newer   string // the first page's address; "" on the first page
}

// AuditRow is one recorded change, as a sentence.
type AuditRow struct {
	ID       int64 // the entry's id, the keyset of paging
	At       string
	Sentence string
}

// Option is one choice of a select.
type Option struct {
	Value string
	Label string
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
