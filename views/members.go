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
	Status    string // active, disabled or removed, as stored; StatusLabel is what the page says
	Invited   bool   // no way in yet: they have not used their invite link
	SignIn    string // how they last signed in: password, OIDC, GitHub, or — if never
	Keys      int    // keys that still work
	URL       string
	StatusURL string
	RemoveURL string
	Self      bool // the viewer: they cannot cut themselves off
	Usage     *MemberUsage
}

// StatusLabel is the member's state as the console names it everywhere:
// "Invited", "Active", "Cut off" (never the stored word, "disabled") or
// "Removed".
func (m MemberRow) StatusLabel() string {
	if m.Invited && m.Status == "active" {
		return "Invited"
	}
	return MemberStateLabel(m.Status)
}

// Removed is a member taken out of the team: listed for the record, with
// nothing left to change.
func (m MemberRow) Removed() bool { return m.Status == "removed" }

// MemberStateLabel names a stored member status.
func MemberStateLabel(status string) string {
	switch status {
	case "active":
		return "Active"
	case "removed":
		return "Removed"
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
