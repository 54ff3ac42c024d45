package views

// Keys is the keys section of one member: the member's own page, or an owner's
// view of that member.
type Keys struct {
	Own       bool   // the viewer's own keys: they may create one
	Disabled  bool   // the member is cut off: no new keys
	CreateURL string // where the create form posts
	Rows      []KeyRow
	New       *NewKey // a key just issued; its plaintext is in this response only
	Error     string
	GraceEnd  string // when a key rotated now would stop working
}

// KeyRow is one key.
type KeyRow struct {
	ID        string
	Name      string
	State     string // active, grace, expired or revoked
	Created   string
	LastUsed  string // when it last made a request, "never" if it has not
	Until     string // the end of a rotated key's grace window
	RotateURL string // empty when the key cannot be rotated
	RevokeURL string // empty when the key cannot be revoked
}

// NewKey is a key just issued, shown once.
type NewKey struct {
	ID        string
	Plaintext string
	Replaces  string // the rotated key, if any
	OldUntil  string // when the rotated key stops working
}
