package console

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

func (c *Console) showSignIn(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if viewerFrom(r.Context()) != nil {
		http.Redirect(w, r, cmp.Or(next, Prefix+"/"), http.StatusSeeOther)
		return
	}
	c.renderSignIn(w, r, http.StatusOK, views.SignIn{Next: next, SignedOut: r.URL.Query().Has("signed_out")})
}

// safeNext is where to go after signing in: next if it is a console path on
// this origin, else "". Anything a browser could read as another host (//evil,
// /\evil, https://evil, a control character) or a path outside the console is
// refused rather than repaired.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.ContainsAny(next, "\\") {
		return ""
	}
	for _, b := range []byte(next) {
		if b < 0x20 || b == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return ""
	}
	return next
}

// signIn checks an email and password. Failures are counted per account and
// per remote address; past either limit every attempt is refused for a while,
// right password or not. The message never says which part was wrong or
// whether the account exists.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "email", "password", "next")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	email := strings.ToLower(strings.TrimSpace(form.Get("email")))
	next := safeNext(form.Get("next"))
	account, address := "account:"+email, "address:"+remoteHost(r)
	if wait := max(c.accounts.retryAfter(account), c.addresses.retryAfter(address)); wait > 0 {
		observe.Security(r.Context(), c.log, "console_sign_in", "locked_out", slog.String("address", remoteHost(r)))
		minutes := int(wait.Round(time.Minute) / time.Minute)
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		c.renderSignIn(w, r, http.StatusTooManyRequests, views.SignIn{Email: email, Next: next,
			Error: fmt.Sprintf("Too many failed sign-ins. Try again in %d minutes.", max(minutes, 1))})
		return
	}

	select {
	case c.hashing <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	m, err := c.st.SignIn(r.Context(), email, form.Get("password"))
	<-c.hashing
	if errors.Is(err, store.ErrBadCredentials) {
		c.accounts.fail(account)
		c.addresses.fail(address)
		observe.Security(r.Context(), c.log, "console_sign_in", "failed", slog.String("address", remoteHost(r)))
		c.renderSignIn(w, r, http.StatusUnauthorized, views.SignIn{Email: email, Next: next, Error: "Wrong email or password."})
		return
	}
	if errors.Is(err, store.ErrPasswordSignInOff) {
		c.accounts.reset(account)
		c.renderSignIn(w, r, http.StatusForbidden, views.SignIn{Email: email, Next: next,
			Error: "Your team signs in through single sign-on only: use its button above."})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.accounts.reset(account)
	if err := c.signInAs(w, r, m, cmp.Or(next, Prefix+"/")); err != nil {
		c.fail(w, r, err)
	}
}

// signOut ends the session: its row is deleted, so the old cookie is worthless.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if _, err := readForm(w, r); err != nil {
		c.fail(w, r, err)
		return
	}
	if err := c.sessions.Destroy(r.Context()); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/signin?signed_out", http.StatusSeeOther)
}

// remoteHost is the client's address as this process sees it. Behind a proxy
// that is the proxy's address, which makes the per-address limit shared by
// everyone behind it; the per-account limit still holds.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
