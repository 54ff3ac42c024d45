package views

// Members is the owner's team page.
type Members struct {
	Nav    Nav
	Rows   []MemberRow
	Invite Invite
}

// MemberRow is one member in the owner's table.
type MemberRow struct {
	ID        int64
	Email     string
	Role      string
	Status    string // active or disabled, as stored; StatusLabel is what the page says
	SignIn    string // how they last signed in: password, OIDC, GitHub, or — if never
	Keys      int    // keys that still work
	URL       string
	StatusURL string
	Self      bool // the viewer: they cannot cut themselves off
	Usage     *MemberUsage
}

// StatusLabel is the member's state as the console names it everywhere:
// "Active" or "Cut off" (never the stored word, "disabled").
func (m MemberRow) StatusLabel() string { return MemberStateLabel(m.Status) }

// MemberStateLabel names a stored member status.
func MemberStateLabel(status string) string {
	if status == "active" {
		return "Active"
	}
	return "Cut off"
}

// MemberUsage is a member's traffic in the last minute and spend this budget
// period. It is nil when the figures could not be read; the table then shows
// "—" rather than an invented number.
type MemberUsage struct {
	Requests  string
	Throttled string
	Spend     string
}

// Invite is the invite form and the link it just made.
type Invite struct {
	Email     string
	Role      string
	Error     string
	Link      string // shown once, right after it is made
	LinkEmail string
	ExpiresAt string
	Pending   []PendingInvite
	Tier      string   // the tier chosen: "" the team's default, "none", or a tier's name
	Tiers     []string // the team's tiers
	Default   string   // the team's default tier; "" when none
}

// PendingInvite is an invite not yet used.
type PendingInvite struct {
	Email     string
	Role      string
	ExpiresAt string
}

// Where an owner posts an email to take its pending invites back, or to
// replace them with a new link.
const (
	InviteRevokeURL  = "/console/members/invites/revoke"
	InviteReissueURL = "/console/members/invites/reissue"
)

// Member is an owner's view of one member.
type Member struct {
	Nav    Nav
	Row    MemberRow
	Usage  Usage
	Limits LimitsForm
	Keys   Keys
	Tier   *TierAssign // nil when the team has no tiers
}
