package console

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"

	"github.com/tollgate/tollgate/app/store"
)

// Session keys. The member's role and status are read from the database on
// every request, never cached here, so a cut-off or role change applies at once.
// The epoch is the member's session epoch at sign-in: a cut-off or restore
// moves the member's on, ending every session signed in before it.
const (
	sessionMember = "member_id"
	sessionTeam   = "team_id"
	sessionEpoch  = "session_epoch"
)

// newSessions stores sessions server-side in Postgres (any replica serves them),
// keyed by a hash of the token so the table never holds a usable session id.
func newSessions(o Options, log *slog.Logger) *scs.SessionManager {
	s := scs.New()
	// No cleanup goroutine (it could not be stopped without a data race):
	// expired rows are ignored by the store and deleted at each sign-in.
	s.Store = pgxstore.NewWithCleanupInterval(o.Pool, 0)
	s.HashTokenInStore = true
	s.IdleTimeout = cmp.Or(o.SessionIdleTimeout, 8*time.Hour)
	s.Lifetime = cmp.Or(o.SessionLifetime, 24*time.Hour)
	s.Cookie.Name, s.Cookie.Secure = cookieName(o.PublicURL)
	s.Cookie.HttpOnly = true
	s.Cookie.SameSite = http.SameSiteLaxMode
	s.Cookie.Path = "/"
	s.Cookie.Persist = false // gone when the browser closes; the server ends it sooner if idle
	s.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		log.Error("console session", "err", err, "path", r.URL.Path)
		http.Error(w, "session store unavailable", http.StatusInternalServerError)
	}
	return s
}

// cookieName picks the session cookie. Over TLS it is __Host-tollgate: Secure,
// Path=/ and no Domain, so no other host or plain-http page can set or read it.
// Browsers refuse a __Host- cookie that is not Secure, and drop Secure cookies
// set over plain http, so `make run` on http://localhost uses a plain name.
func cookieName(publicURL string) (name string, secure bool) {
	if strings.HasPrefix(publicURL, "https://") {
		return "__Host-tollgate", true
	}
	return "tollgate", false
}

// viewer is the signed-in member and their team.
type viewer struct {
	member store.Member
	team   store.Team
}

func (v *viewer) owner() bool {
	return v.member.Role == store.RoleOwner && v.member.Status == store.StatusActive
}

func (v *viewer) actor() store.Actor { return store.MemberActor(v.member.ID) }

type viewerKey struct{}

// viewerFrom returns the signed-in member, or nil.
func viewerFrom(ctx context.Context) *viewer {
	v, _ := ctx.Value(viewerKey{}).(*viewer)
	return v
}

// loadViewer resolves the session's member, scoped by the session's team. A
// session whose member is gone, or was cut off or restored since it signed in,
// is destroyed: that person signs in again.
func (c *Console) loadViewer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		memberID := c.sessions.GetInt64(ctx, sessionMember)
		teamID := c.sessions.GetInt64(ctx, sessionTeam)
		if memberID == 0 {
			next.ServeHTTP(w, r)
			return
		}
		m, err := c.st.FindMember(ctx, teamID, strconv.FormatInt(memberID, 10))
		var t store.Team
		if err == nil {
			t, err = c.st.FindTeam(ctx, strconv.FormatInt(teamID, 10))
		}
		if err == nil && m.SessionEpoch != c.sessions.GetInt64(ctx, sessionEpoch) {
			err = store.ErrNotFound
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			if err := c.sessions.Destroy(ctx); err != nil {
				c.fail(w, r, err)
				return
			}
		case err != nil:
			c.fail(w, r, err)
			return
		default:
			r = r.WithContext(context.WithValue(ctx, viewerKey{}, &viewer{member: m, team: t}))
		}
		next.ServeHTTP(w, r)
	})
}

// require enforces a route's access: without a session, pages redirect to
// sign-in, HTMX requests get 401 (with HX-Redirect, so the browser still lands
// on the sign-in page) and event streams are told they are signed out; a member
// on an owner route gets 403.
func (c *Console) require(a access) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v := viewerFrom(r.Context())
			switch {
			case a == anyone:
			case v == nil && isEventStream(r):
				signedOut(w)
				return
			case v == nil && isHTMX(r):
				w.Header().Set("HX-Redirect", Prefix+"/signin")
				c.failWith(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended; sign in again.")
				return
			case v == nil:
				// A page asked for by its address is where sign-in returns to.
				to := Prefix + "/signin"
				if r.Method == http.MethodGet && r.URL.Path != Prefix+"/" {
					to += "?next=" + url.QueryEscape(r.URL.RequestURI())
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			case a == owner && !v.owner():
				c.failWith(w, r, http.StatusForbidden, "Owners only", "Only an active team owner can do this.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// signInAs starts a fresh session for m: a new token (so a token planted before
// sign-in is worthless), and expired sessions swept; then it goes to page.
func (c *Console) signInAs(w http.ResponseWriter, r *http.Request, m store.Member, page string) error {
	ctx := r.Context()
	if err := c.sessions.RenewToken(ctx); err != nil {
		return err
	}
	c.sessions.Put(ctx, sessionMember, m.ID)
	c.sessions.Put(ctx, sessionTeam, m.TeamID)
	c.sessions.Put(ctx, sessionEpoch, m.SessionEpoch)
	if err := c.st.DeleteExpiredSessions(ctx); err != nil {
		c.log.Warn("console: sweeping expired sessions", "err", err)
	}
	c.log.Info("console sign-in", "member_id", m.ID, "team_id", m.TeamID)
	http.Redirect(w, r, page, http.StatusSeeOther)
	return nil
}
