package views

import "github.com/tollgate/tollgate/app/store"

// SignIn is the sign-in form, refilled after a failure.
type SignIn struct {
	Email     string
	Error     string
	Next      string // the console page to return to after signing in; "" for the home page
	SignedOut bool   // the member just signed out
	Methods   []SignInMethod
}

// Setup is the first-run form that creates a team and its owner.
type Setup struct {
	Action    string
	Team      string
	Email     string
	ExpiresAt string
	Error     string
}

// InviteAccept is the form a member opens from an invite link.
type InviteAccept struct {
	Action string
	Team   string
	Email  string
	Role   string
	Error  string
	// Methods are the team's enabled single sign-on methods, each completing
	// the invite; PasswordOff leaves only them.
	Methods     []SignInMethod
	PasswordOff bool
}

// PasswordMinLen is the shortest password the store accepts, for the form's hint.
const PasswordMinLen = store.PasswordMinLen
