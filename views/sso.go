package views

// SignInMethod is a "Sign in with …" button on the sign-in page.
type SignInMethod struct {
	Label string // e.g. "Sign in with Okta (acme)"
	URL   string
}

// SignInSettings is the owners' page of how the team signs in.
type SignInSettings struct {
	Nav            Nav
	PasswordSignIn bool
	PasswordAction string
	PasswordError  string
	Methods        []SSOForm
}

// SSOForm configures one kind of single sign-on.
type SSOForm struct {
	Kind        string // oidc or github
	Title       string
	Action      string
	DisplayName string
	IssuerURL   string
	ClientID    string
	JoinPolicy  string
	Domains     string // comma-separated
	Org         string
	Enabled     bool
	// SecretEnv is the variable that must hold the client secret on every replica.
	SecretEnv string
	SecretSet bool
	// CallbackURL is the redirect URL to register with the provider.
	CallbackURL string
	Saved       bool
	// Check is the result of trying the configuration against the provider;
	// CheckOK says whether it worked. Empty: not tried on this page.
	Check   string
	CheckOK bool
	Error   string
}
