package views

// Usage is one member's own traffic: live counts, budget, limits and recent
// requests. A member sees theirs on their page; an owner sees any member's.
type Usage struct {
	Own        bool   // the viewer's own usage ("you")
	StreamURL  string // pushes UsageSection again every second; "" when not live
	StaleAfter string // milliseconds without an event after which the page says it is not live
	Connected  bool   // live counters were readable
	Updated    string
	Requests   string // in the last minute
	Throttled  string
	OverBudget string
	Refused    string
	Tokens     string
	InFlight   string
	LastSeen   string
	Budget     Budget
	TeamBudget string // "the team's budget is used up" when it is, else ""
	// Shortfalls explain a budget that is not used up yet refuses requests:
	// one request on a model may cost more than is left.
	Shortfalls []string
	Limits     []LimitLine
	Recent     []RecentRequest
}

// LimitLine is one limit, read-only: "Rate" "10 per second (token bucket)".
type LimitLine struct {
	Name  string
	Value string
}

// RecentRequest is one ledger row, or one refused request.
type RecentRequest struct {
	At          string
	KeyID       string // the key that made it
	KeyName     string // "" when the key has no name
	Model       string
	Input       string
	Output      string
	CacheWrite  string
	CacheRead   string
	Cost        string
	Status      string // "200 settled"
	StatusClass string
}

// possessive is "your" on the viewer's own page, "their" on an owner's view.
func possessive(own bool) string {
	if own {
		return "your"
	}
	return "their"
}
