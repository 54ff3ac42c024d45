// Package console is the team's web console: sign-in, first-run setup, invites,
// each member's own keys and live usage, and the owners' live dashboard,
// members, limits, routes, prices and audit pages. It renders templ views
// (package views) with HTMX as an enhancement (and Server-Sent Events for the
// live figures), and every write calls the same store functions as the CLI, so
// it is audited the same way.
package console

import (
	"cmp"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/sso"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/static"
)

// Options configure a Console.
type Options struct {
	Store *store.Store
	// Pool holds the sessions table, so any replica serves any session.
	Pool *pgxpool.Pool
	// Getenv tells whether a route's credential variable is set (only emptiness
	// is looked at), and reads teams' SSO client secrets, which go only to their
	// provider's token endpoint. No value reaches a page.
	Getenv func(string) string
	// PublicURL is where members reach the gateway: it goes into snippets and
	// links, and an https URL makes the session cookie Secure and __Host-.
	PublicURL string
	Logger    *slog.Logger
	// KeyRotationGrace is how long a rotated key keeps working; default 24h.
	KeyRotationGrace time.Duration
	// SessionIdleTimeout signs a session out after this long without a request;
	// default 8h. SessionLifetime ends it regardless; default 24h.
	SessionIdleTimeout time.Duration
	SessionLifetime    time.Duration
	// SignInLimit bounds sign-in attempts; zero fields take the defaults.
	SignInLimit SignInLimit
	// Redis, when set, holds the sign-in throttle's counts under RedisKeyPrefix,
	// so every replica shares them; nil keeps them in this process, which is
	// exact only while one replica runs.
	Redis          redis.UniversalClient
	RedisKeyPrefix string
	// ClientIPHeader names the header a trusted proxy sets to the caller's
	// address; "" takes the connection's peer (CLIENT_IP_HEADER).
	ClientIPHeader string
	// Live is the gateway's live traffic, summed over every replica; nil shows
	// "—" where live figures would be.
	Live *live.Stats
	// StreamInterval is how often the dashboard's and usage streams push new
	// figures; default 1s. StreamLifetime ends a stream, which the browser then
	// reopens through the session check; default 1m.
	StreamInterval time.Duration
	StreamLifetime time.Duration
	// SSO configures the single sign-on flows (GitHub's URLs, timeouts).
	SSO sso.Options
}

// SignInLimit is how many sign-in attempts are allowed within Window, per
// account (default 10) and per client address (default 50); default window
// 15m. A successful sign-in gives its attempt back.
type SignInLimit struct {
	PerAccount int
	PerAddress int
	Window     time.Duration
}

// Console serves the console pages.
type Console struct {
	st        *store.Store
	getenv    func(string) string
	publicURL string
	log       *slog.Logger
	grace     time.Duration
	sessions  *scs.SessionManager
	throttle  throttle
	limit     SignInLimit
	// clientIPHeader is Options.ClientIPHeader.
	clientIPHeader string
	// hashing bounds concurrent sign-in attempts, each of which costs a
	// memory-hard password hash (19 MiB), so a flood cannot exhaust memory.
	hashing chan struct{}
	sso     *sso.Client

	live           *live.Stats
	streamInterval time.Duration
	streamLifetime time.Duration
	streams        atomic.Int64  // open event streams
	closing        chan struct{} // closed by CloseStreams
	closeOnce      sync.Once
}

// New returns a Console; Mount puts it on a router.
func New(o Options) *Console {
	limit := SignInLimit{
		PerAccount: cmp.Or(o.SignInLimit.PerAccount, 10),
		PerAddress: cmp.Or(o.SignInLimit.PerAddress, 50),
		Window:     cmp.Or(o.SignInLimit.Window, 15*time.Minute),
	}
	c := &Console{
		st:             o.Store,
		getenv:         o.Getenv,
		publicURL:      strings.TrimRight(o.PublicURL, "/"),
		log:            o.Logger,
		grace:          cmp.Or(o.KeyRotationGrace, 24*time.Hour),
		throttle:       newLocalThrottle(limit.Window),
		limit:          limit,
		clientIPHeader: o.ClientIPHeader,
		hashing:        make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		sso:            sso.New(o.SSO),

		live:           o.Live,
		streamInterval: cmp.Or(o.StreamInterval, time.Second),
		streamLifetime: cmp.Or(o.StreamLifetime, time.Minute),
		closing:        make(chan struct{}),
	}
	if o.Redis != nil {
		c.throttle = newRedisThrottle(o.Redis, o.RedisKeyPrefix, limit.Window)
	}
	c.sessions = newSessions(o, c.log)
	return c
}

// Prefix is where the console is mounted.
const Prefix = "/console"

// SetupURL is the first-run link for a setup token.
func SetupURL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + Prefix + "/setup/" + token
}

// InviteURL is the link for an invite token.
func InviteURL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + Prefix + "/invite/" + token
}

// access is who may call a route.
type access int

const (
	anyone access = iota // sign-in, one-time links; they check their own token
	member               // any signed-in member; handlers scope ids to the member's own rows (404 otherwise)
	owner                // an active owner of the team in the session; others get 403
)

func (a access) String() string { return [...]string{"anyone", "member", "owner"}[a] }

type route struct {
	method, pattern string
	access          access
	handler         http.HandlerFunc
}

// routes is every console route with its authorization decision. Mount
// registers exactly these; a test walks the mounted router and fails on any
// route missing here.
func (c *Console) routes() []route {
	return []route{
		{"GET", "/", member, c.showHome},
		{"GET", "/usage/live", member, c.streamUsage},
		{"GET", "/signin", anyone, c.showSignIn},
		{"POST", "/signin", anyone, c.signIn},
		{"POST", "/signout", member, c.signOut},
		{"GET", "/signin/{team}/{kind}", anyone, c.startSSO},
		{"GET", "/signin/{team}/{kind}/callback", anyone, c.finishSSO},
		{"GET", "/setup/{token}", anyone, c.showSetup},
		{"POST", "/setup/{token}", anyone, c.completeSetup},
		{"GET", "/invite/{token}", anyone, c.showInvite},
		{"POST", "/invite/{token}", anyone, c.acceptInvite},
		{"GET", "/invite/{token}/signin/{kind}", anyone, c.startInviteSSO},

		{"POST", "/keys", member, c.createKey},
		{"POST", "/keys/{id}/rotate", member, c.rotateKey},
		{"POST", "/keys/{id}/revoke", member, c.revokeKey},

		{"GET", "/dashboard", owner, c.showDashboard},
		{"GET", "/dashboard/live", owner, c.streamDashboard},
		{"GET", "/team/limits", owner, c.showTeamLimits},
		{"POST", "/team/limits", owner, c.setTeamLimits},
		{"POST", "/checklist/defaults", owner, c.setDefaults},
		{"GET", "/team/sign-in", owner, c.showSignInSettings},
		{"POST", "/team/sign-in/sso/{kind}", owner, c.setSSOMethod},
		{"POST", "/team/sign-in/password", owner, c.setPasswordSignIn},
		{"GET", "/team/tokens", owner, c.listAdminTokens},
		{"POST", "/team/tokens", owner, c.createAdminToken},
		{"POST", "/team/tokens/{id}/revoke", owner, c.revokeAdminToken},
		{"GET", "/team/webhooks", owner, c.listWebhooks},
		{"POST", "/team/webhooks", owner, c.createWebhook},
		{"POST", "/team/webhooks/{id}/test", owner, c.testWebhook},
		{"POST", "/team/webhooks/{id}/delete", owner, c.deleteWebhook},
		{"GET", "/members", owner, c.listMembers},
		{"POST", "/members/invite", owner, c.createInvite},
		{"POST", "/members/invites/revoke", owner, c.revokeInvite},
		{"POST", "/members/invites/reissue", owner, c.reissueInvite},
		{"GET", "/members/{id}", owner, c.showMember},
		{"POST", "/members/{id}/status", owner, c.setMemberStatus},
		{"POST", "/members/{id}/remove", owner, c.removeMember},
		{"POST", "/members/{id}/limits", owner, c.setMemberLimits},
		{"GET", "/routes", owner, c.listRoutes},
		{"POST", "/routes", owner, c.addRoute},
		{"GET", "/routes/{id}", owner, c.showRoute},
		{"POST", "/routes/{id}", owner, c.updateRoute},
		{"POST", "/routes/{id}/targets", owner, c.addRouteTarget},
		{"POST", "/routes/{id}/targets/remove", owner, c.removeRouteTarget},
		{"POST", "/routes/{id}/resilience", owner, c.setRouteResilience},
		{"POST", "/routes/{id}/delete", owner, c.deleteRoute},
		{"GET", "/prices", owner, c.listPrices},
		{"POST", "/prices", owner, c.setPrice},
		{"GET", "/prices/edit", owner, c.showPrice},
		{"GET", "/audit", owner, c.showAudit},
		{"GET", "/tiers", owner, c.listTiers},
		{"POST", "/tiers", owner, c.createTier},
		{"GET", "/tiers/{name}", owner, c.showTier},
		{"POST", "/tiers/{name}", owner, c.setTier},
		{"POST", "/tiers/{name}/delete", owner, c.deleteTier},
		{"POST", "/members/{id}/tier", owner, c.setMemberTier},
		{"POST", "/budget-requests", member, c.requestBudget},
		{"POST", "/budget-requests/{id}/approve", owner, c.approveBudgetRequest},
		{"POST", "/budget-requests/{id}/decline", owner, c.declineBudgetRequest},
	}
}

// Mount adds the console under /console, its assets under /static and its icon
// at /favicon.ico (browsers ask for it there whatever the page links).
func (c *Console) Mount(r chi.Router) {
	r.With(compress).Handle(static.Prefix+"*", static.Handler())
	r.Handle("/favicon.ico", static.Icon())
	r.Route(Prefix, func(r chi.Router) {
		r.Use(compress, securityHeaders, crossOrigin(c), c.sessions.LoadAndSave, c.loadViewer, c.utf8Address)
		r.NotFound(func(w http.ResponseWriter, r *http.Request) { c.fail(w, r, store.ErrNotFound) })
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			c.failWith(w, r, http.StatusMethodNotAllowed, "Method not allowed", "This address does not take that kind of request.")
		})
		for _, rt := range c.routes() {
			r.With(c.require(rt.access)).Method(rt.method, rt.pattern, rt.handler)
		}
	})
}

// compress gzips the console's pages and assets for a browser that accepts it.
// It picks by the response's type, so event streams (text/event-stream, which
// must reach the browser as each event is flushed) pass through untouched; the
// gateway's provider routes are mounted elsewhere and never see it.
var compress = middleware.Compress(5, "text/html", "text/css", "text/javascript", "application/javascript", "image/svg+xml")

// securityHeaders keeps console pages out of caches (they hold keys, links and
// per-person data), out of frames, and limited to the console's own assets.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// Setup and invite links carry their token in the path: never send it on.
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses state-changing requests from other origins (Sec-Fetch-Site,
// else Origin against Host) with 403, before any session is loaded.
func crossOrigin(c *Console) func(http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.failWith(w, r, http.StatusForbidden, "Cross-origin request refused",
			"The console only accepts changes from its own pages.")
	}))
	return cop.Handler
}
