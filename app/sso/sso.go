// Package sso signs a person in through their team's identity provider: any
// OpenID Connect issuer (authorization code flow with PKCE, nonce and a
// verified ID token) or GitHub's OAuth app flow, which is not OIDC and is
// checked through GitHub's API instead. It only establishes who the person is;
// whether they may join or sign in to a team is the store's decision.
package sso

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/tollgate/tollgate/proxy/netguard"
)

// Kinds of sign-in method.
const (
	KindOIDC   = "oidc"
	KindGitHub = "github"
)

// Config is one team's provider as the flow needs it.
type Config struct {
	Kind         string
	IssuerURL    string // OIDC only
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback registered with the provider.
	RedirectURL string
	// Org, for GitHub, is the organisation whose membership is looked up.
	Org string
}

// GitHub is where GitHub's OAuth pages and API are; tests point it at a fake.
type GitHub struct {
	WebURL string // default https://github.com
	APIURL string // default https://api.github.com
}

// Options configure a Client.
type Options struct {
	GitHub GitHub
	// Timeout bounds each call to a provider; default 10s.
	Timeout time.Duration
	// Outbound checks every address a call connects to, redirects included
	// (default: a guard with no allow-list, which refuses loopback and private
	// addresses).
	Outbound *netguard.Guard
}

// Client runs sign-in flows. It keeps each issuer's discovery document and
// signing keys for a while, so a sign-in costs one token request.
type Client struct {
	http     *http.Client
	outbound *netguard.Guard
	github   GitHub

	mu        sync.Mutex
	providers map[string]cachedProvider
}

type cachedProvider struct {
	provider *oidc.Provider
	until    time.Time
}

// providerTTL is how long a discovery document is trusted before it is fetched again.
const providerTTL = 10 * time.Minute

// New returns a Client.
func New(o Options) *Client {
	if o.Outbound == nil {
		o.Outbound = netguard.New(netguard.Options{})
	}
	return &Client{
		http:     o.Outbound.Client(cmp.Or(o.Timeout, 10*time.Second)),
		outbound: o.Outbound,
		github: GitHub{
			WebURL: cmp.Or(o.GitHub.WebURL, "https://github.com"),
			APIURL: cmp.Or(o.GitHub.APIURL, "https://api.github.com"),
		},
		providers: map[string]cachedProvider{},
	}
}

// Flow is what the browser's server-side session holds between Begin and
// Finish: a callback is accepted only with this state, and its ID token only
// with this nonce, so a code cannot be replayed into another browser.
type Flow struct {
	State    string
	Nonce    string
	Verifier string // PKCE
}

// Identity is who the provider says signed in. Email is always one the
// provider has verified.
type Identity struct {
	Email   string
	Subject string
	// OrgMember is true when Config.Org was set and the person is an active member of it.
	OrgMember bool
}

// ProviderError means the provider could not be used: it does not answer, its
// discovery document is wrong, or it refused the client id or secret. It is the
// team's configuration at fault, not the person signing in.
type ProviderError struct{ Problem string }

func (e *ProviderError) Error() string { return e.Problem }

// RefusedError means the provider answered but this sign-in cannot be
// accepted: an unverified email, a token that does not verify, a callback that
// does not belong to this browser's flow.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Begin starts a flow: the URL to send the browser to, and the Flow to keep.
func (c *Client) Begin(ctx context.Context, cfg Config) (string, Flow, error) {
	flow := Flow{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	oc, err := c.oauth2Config(ctx, cfg)
	if err != nil {
		return "", Flow{}, err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(flow.Verifier)}
	if cfg.Kind == KindOIDC {
		opts = append(opts, oidc.Nonce(flow.Nonce))
	}
	return oc.AuthCodeURL(flow.State, opts...), flow, nil
}

// Finish completes a flow from the callback's query.
func (c *Client) Finish(ctx context.Context, cfg Config, flow Flow, query url.Values) (Identity, error) {
	if flow.State == "" || subtle.ConstantTimeCompare([]byte(query.Get("state")), []byte(flow.State)) != 1 {
		return Identity{}, refused("this sign-in was not started in this browser, or was started again since; start it once more")
	}
	if code := query.Get("error"); code != "" {
		return Identity{}, refused("the provider did not sign you in (%s)", errorCode(code))
	}
	code := query.Get("code")
	if code == "" {
		return Identity{}, refused("the provider sent no sign-in code")
	}
	oc, err := c.oauth2Config(ctx, cfg)
	if err != nil {
		return Identity{}, err
	}
	tok, err := oc.Exchange(c.clientContext(ctx), code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		return Identity{}, exchangeError(err)
	}
	if cfg.Kind == KindGitHub {
		return c.githubIdentity(ctx, cfg, tok)
	}
	return c.oidcIdentity(ctx, cfg, flow, tok)
}

func (c *Client) oidcIdentity(ctx context.Context, cfg Config, flow Flow, tok *oauth2.Token) (Identity, error) {
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, &ProviderError{Problem: "the provider's token response has no ID token (is this an OpenID Connect issuer?)"}
	}
	p, err := c.provider(ctx, cfg.IssuerURL)
	if err != nil {
		return Identity{}, err
	}
	// Verify checks the signature against the issuer's published keys, the
	// issuer, the audience (our client id) and the expiry.
	idt, err := p.VerifierContext(c.clientContext(ctx), &oidc.Config{ClientID: cfg.ClientID}).Verify(c.clientContext(ctx), raw)
	if err != nil {
		return Identity{}, refused("the provider's ID token is not valid: %s", idTokenProblem(err))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.Nonce)) != 1 {
		return Identity{}, refused("the provider's ID token belongs to another sign-in (its nonce does not match); start again")
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, refused("the provider's ID token has unreadable claims")
	}
	// Some issuers send the boolean as a string; anything else is not verified.
	verified := claims.EmailVerified == true || claims.EmailVerified == "true"
	if claims.Email == "" {
		return Identity{}, refused("the provider did not share an email address (the client must be allowed the email scope)")
	}
	if !verified {
		return Identity{}, refused("the provider has not verified the email address %s", claims.Email)
	}
	return Identity{Email: claims.Email, Subject: idt.Subject}, nil
}

// Probe checks a configuration without a person: the issuer's discovery
// document is fetched, and a made-up code is exchanged, which a provider
// refuses as a bad grant when the client id and secret are right and as a bad
// client when they are not.
func (c *Client) Probe(ctx context.Context, cfg Config) error {
	oc, err := c.oauth2Config(ctx, cfg)
	if err != nil {
		return err
	}
	_, err = oc.Exchange(c.clientContext(ctx), "tollgate-configuration-check", oauth2.VerifierOption(oauth2.GenerateVerifier()))
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.ErrorCode != "" && !clientRefused(re.ErrorCode) {
		// Providers authenticate the client before they look at the code
		// (RFC 6749 §3.2.1): any complaint about the code means the client passed.
		return nil
	}
	if err == nil {
		return nil
	}
	return exchangeError(err)
}

// clientRefused tells the OAuth error codes that blame the client id or
// secret (GitHub's own among them).
func clientRefused(code string) bool {
	return code == "invalid_client" || code == "unauthorized_client" || code == "incorrect_client_credentials"
}

func (c *Client) oauth2Config(ctx context.Context, cfg Config) (*oauth2.Config, error) {
	oc := &oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL}
	switch cfg.Kind {
	case KindOIDC:
		p, err := c.provider(ctx, cfg.IssuerURL)
		if err != nil {
			return nil, err
		}
		oc.Endpoint = p.Endpoint()
		oc.Scopes = []string{oidc.ScopeOpenID, "email"}
	case KindGitHub:
		oc.Endpoint = oauth2.Endpoint{AuthURL: c.github.WebURL + "/login/oauth/authorize",
			TokenURL: c.github.WebURL + "/login/oauth/access_token", AuthStyle: oauth2.AuthStyleInParams}
		oc.Scopes = []string{"read:user", "user:email"}
		if cfg.Org != "" {
			oc.Scopes = append(oc.Scopes, "read:org")
		}
	default:
		return nil, &ProviderError{Problem: fmt.Sprintf("unknown sign-in method %q", cfg.Kind)}
	}
	return oc, nil
}

// provider returns the issuer's discovery, fetched at most every providerTTL.
// Failures are not kept, so a fixed issuer works at the next attempt.
func (c *Client) provider(ctx context.Context, issuer string) (*oidc.Provider, error) {
	c.mu.Lock()
	cached, ok := c.providers[issuer]
	c.mu.Unlock()
	if ok && time.Now().Before(cached.until) {
		return cached.provider, nil
	}
	// Checked here too, not only at the dial, for an error that says why.
	if _, err := c.outbound.CheckURL(ctx, issuer); err != nil {
		return nil, &ProviderError{Problem: fmt.Sprintf("the issuer %s is refused: %v", issuer, err)}
	}
	// The provider keeps this context's HTTP client (not its deadline) for
	// fetching signing keys later.
	p, err := oidc.NewProvider(c.clientContext(ctx), issuer)
	if err != nil {
		return nil, &ProviderError{Problem: fmt.Sprintf("the issuer %s does not serve a usable OpenID configuration: %s", issuer, discoveryProblem(err))}
	}
	// The discovery document is the issuer's word, not the owner's: the
	// endpoints the gateway will call are held to the same guard.
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil {
		return nil, &ProviderError{Problem: fmt.Sprintf("the issuer %s does not serve a usable OpenID configuration", issuer)}
	}
	for _, ep := range []struct{ name, url string }{{"token_endpoint", p.Endpoint().TokenURL}, {"jwks_uri", doc.JWKSURI}} {
		if _, err := c.outbound.CheckURL(ctx, ep.url); err != nil {
			return nil, &ProviderError{Problem: fmt.Sprintf("the issuer %s names a %s the gateway refuses to call: %s", issuer, ep.name, endpointProblem(err))}
		}
	}
	c.mu.Lock()
	c.providers[issuer] = cachedProvider{provider: p, until: time.Now().Add(providerTTL)}
	c.mu.Unlock()
	return p, nil
}

// clientContext makes go-oidc and oauth2 use the client's bounded HTTP client.
func (c *Client) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, c.http), c.http)
}

// exchangeError sorts a failed code exchange into the team's fault (the
// provider refuses the client, or does not answer) and the person's (the code
// is expired or used). Only the RFC 6749 error code is ever quoted: providers'
// descriptions may echo what was sent, client secret included.
func exchangeError(err error) error {
	if err == nil {
		return nil
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		if _, ok := errors.AsType[*url.Error](err); !ok {
			// oauth2 quotes what it could not parse of the answer.
			return &ProviderError{Problem: "the provider's token endpoint answered with something other than a token response"}
		}
		return &ProviderError{Problem: "the provider's token endpoint does not answer: " + transportProblem(err)}
	}
	switch {
	case clientRefused(re.ErrorCode):
		return &ProviderError{Problem: "the provider refused the client id or secret (" + errorCode(re.ErrorCode) + ")"}
	case re.ErrorCode == "invalid_grant" || re.ErrorCode == "bad_verification_code":
		return refused("the provider no longer accepts this sign-in code (it expired or was used); start again")
	case re.ErrorCode == "":
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &ProviderError{Problem: fmt.Sprintf("the provider's token endpoint answered HTTP %d without an OAuth error", status)}
	default:
		return &ProviderError{Problem: "the provider's token endpoint refused the exchange (" + errorCode(re.ErrorCode) + ")"}
	}
}

var oauthErrorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// errorCode quotes an OAuth error code only if it looks like one.
func errorCode(code string) string {
	if oauthErrorCode.MatchString(code) {
		return code
	}
	return "unrecognised error"
}

// transportProblem names a network failure without the request URL's query.
func transportProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// discoveryProblem names why discovery failed without quoting the answer:
// go-oidc's errors carry the body of a failed fetch, the Content-Type, and the
// issuer the document names, all the endpoint's words.
func discoveryProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return transportProblem(err)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "did not match the issuer URL returned by provider"):
		return "its discovery document names another issuer"
	case strings.Contains(msg, "failed to decode provider discovery object"):
		return "its discovery document is not JSON"
	case len(msg) > 4 && msg[3] == ' ' && strings.Trim(msg[:3], "0123456789") == "":
		// "404 Not Found: <body>": only the status code is ours to repeat.
		return "its discovery document answered HTTP " + msg[:3]
	default:
		return "its discovery document could not be read"
	}
}

// endpointProblem names why the guard refused an endpoint a discovery
// document named: the address and the reason, never the URL's path or query.
func endpointProblem(err error) string {
	if re, ok := errors.AsType[*netguard.RefusedError](err); ok {
		return re.Error()
	}
	return "it is not a usable http(s) URL"
}

// brief cuts a message that may quote a whole error page (go-oidc quotes the
// body of a failed discovery) to a readable length.
func brief(msg string) string {
	const limit = 200
	if r := []rune(msg); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return msg
}

// idTokenProblem names why go-oidc refused a token in words a person can act on.
func idTokenProblem(err error) string {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return "it has expired (is this server's clock right?)"
	case errors.Is(err, context.DeadlineExceeded):
		return "the issuer's signing keys could not be fetched in time"
	case strings.Contains(err.Error(), "fetching keys"):
		// go-oidc quotes the key endpoint's answer, which is not ours to show.
		return "the issuer's signing keys could not be fetched"
	default:
		return brief(err.Error())
	}
}
