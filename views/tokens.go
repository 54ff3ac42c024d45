package views

// AdminTokensPage is the owners' page of the team's admin API tokens.
type AdminTokensPage struct {
	Nav     Nav
	Section AdminTokens
}

// AdminTokens is the swap target of creating and revoking a token.
type AdminTokens struct {
	Rows []AdminTokenRow
	// New is the token just made, with its secret: shown on this answer only.
	New   *NewAdminToken
	Error string
	// The create form's values, kept when it is refused.
	Name, Role, ExpiresDays string
}

// AdminTokenRow is one token, never its secret.
type AdminTokenRow struct {
	ID, Name, Role, State, ExpiresAt, LastUsed, CreatedBy string
	// Owner is whom the token belongs to: a member's email, "the deployment"
	// (made by the operator's CLI) or "no one (revoked)".
	Owner string
	// RevokeURL is empty once the token no longer works.
	RevokeURL string
}

// NewAdminToken is a token just made.
type NewAdminToken struct {
	ID, Name, Role, ExpiresAt, Plaintext string
}

// AdminTokensURL is the tokens page and where its create form posts.
const AdminTokensURL = "/console/team/tokens"
