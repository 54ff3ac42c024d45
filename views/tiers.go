package views

// Tiers is the owner's list of the team's limit tiers.
type Tiers struct {
	Nav   Nav
	Rows  []TierRow
	Name  string // the create form, as posted
	Error string
}

// TierRow is one tier in the list.
type TierRow struct {
	Name, URL, Limits string
	Members           int64
	Weight            int64
	AutoApprove       string // dollars, "" for none
}

// TierEdit is the owner's page of one tier.
type TierEdit struct {
	Nav         Nav
	Name        string
	Members     int64
	Limits      LimitsForm // Action is where the whole form posts
	Weight      string
	AutoApprove string
	OverBudget  string // "refuse" or "fit"
	DeleteURL   string
}

// TierAssign is the tier picker on an owner's page of a member.
type TierAssign struct {
	Action  string
	Current string
	Options []string
}

// BudgetAsk is a member's form to ask for more budget, and their requests.
type BudgetAsk struct {
	Action   string // "" when the member has no budget to raise
	Amount   string
	Reason   string
	Error    string
	Requests []BudgetRequestRow
}

// BudgetRequestRow is one request, as the member or an owner sees it.
type BudgetRequestRow struct {
	ID                   int64
	Email, Amount, Asked string
	Reason, Status, Note string
	ApproveURL           string // owners' dashboard only
	DeclineURL           string
}
