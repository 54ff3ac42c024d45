// Package views is the console's HTML: templ components, one file per screen,
// each with the view model it renders beside it. A page wraps its partials in a
// layout; a partial renders exactly the element an HTMX request swaps.
package views

import "strconv"

// Nav is the header of every signed-in page.
type Nav struct {
	Email  string
	Team   string
	Owner  bool
	Active string // the current tab, one of the Tab constants
}

// Tabs of the console header.
const (
	TabKeys      = "keys"
	TabDashboard = "dashboard"
	TabLimits    = "limits"
	TabMembers   = "members"
	TabRoutes    = "routes"
	TabPrices    = "prices"
	TabAudit     = "audit"
)

// htmxConfig lets HTMX swap a 422 (a form re-rendered with its errors) like a
// 200 and keeps other errors unswapped for console.js to announce. It stops
// htmx injecting an inline style that the Content-Security-Policy would block,
// and turns off its eval and script-tag features, which the console never uses.
const htmxConfig = `{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"responseHandling":[` +
	`{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},` +
	`{"code":"[45]..","swap":false,"error":true}]}`

type tab struct{ id, label, href string }

func (n Nav) tabs() []tab {
	tabs := []tab{{TabKeys, "Your keys", "/console/"}}
	if n.Owner {
		tabs = append(tabs, tab{TabDashboard, "Dashboard", "/console/dashboard"}, tab{TabLimits, "Team limits", "/console/team/limits"},
			tab{TabMembers, "Members", "/console/members"},
			tab{TabRoutes, "Routes", "/console/routes"}, tab{TabPrices, "Prices", "/console/prices"},
			tab{TabAudit, "Audit log", "/console/audit"})
	}
	return tabs
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
