package views

// LimitsForm sets a member's or the team's limits. Every field is text as the
// owner typed it, so a refused form comes back exactly as it was posted.
type LimitsForm struct {
	Team         bool   // the team's limits, which bind on top of every member's
	Subject      string // whose limits: a member's email or the team's name
	Action       string
	Algorithm    string // token_bucket or sliding_window
	Rate         string // requests per Period; "" for no rate limit
	Period       string // "1s", "1m", "1h"
	Burst        string // token bucket capacity; "" for the rate itself
	TPM          string // tokens per minute; "" for none
	Concurrency  string // requests in flight; "" for none
	Budget       string // dollars per BudgetPeriod; "" for no budget
	BudgetPeriod string // daily, monthly or total
	Error        string
	Saved        bool
}

// TeamLimits is the page with the team's limits and budget.
type TeamLimits struct {
	Nav   Nav
	Spend Budget
	Form  LimitsForm
}
