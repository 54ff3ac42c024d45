package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
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

// signIn checks an email and password. Each attempt takes a slot from its
// account's and its client address's throttle before the password is
// hashed; past either limit every attempt is refused for a while, right
// password or not. The message never says which part was wrong or whether
// the account exists.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "email", "password", "next")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	email := strings.ToLower(strings.TrimSpace(form.Get("email")))
	vm := views.SignIn{Email: email, Next: safeNext(form.Get("next"))}
	address := c.clientAddress(r)
	account, addressKey := "account:"+email, addressBucket(address)
	id := rand.Text()
	wait, err := c.throttle.Take(ctx, id, bucket{account, c.limit.PerAccount}, bucket{addressKey, c.limit.PerAddress})
	if err != nil {
		c.throttleFailed(w, r, err, vm)
		return
	}
	if wait > 0 {
		observe.Security(ctx, c.log, "console_sign_in", "locked_out", slog.String("address", address))
		c.tooMany(w, r, wait, vm)
		return
	}

	select {
	case c.hashing <- struct{}{}:
	case <-ctx.Done():
		c.giveBack(ctx, id, addressKey, account) // gone before any guess was made
		return
	}
	m, err := c.st.SignIn(ctx, email, form.Get("password"))
	<-c.hashing
	switch {
	case errors.Is(err, store.ErrBadCredentials):
		observe.Security(ctx, c.log, "console_sign_in", "failed", slog.String("address", address))
		vm.Error = "Wrong email or password."
		c.renderSignIn(w, r, http.StatusUnauthorized, vm)
		return
	case err != nil && !errors.Is(err, store.ErrPasswordSignInOff):
		c.fail(w, r, err)
		return
	}
	// The password was right: this attempt was no guess, and the account's
	// earlier failures no longer matter.
	c.giveBack(ctx, id, addressKey)
	if err := c.throttle.Reset(context.WithoutCancel(ctx), account); err != nil {
		c.log.Warn("console: sign-in throttle not reset", "err", err)
	}
	if errors.Is(err, store.ErrPasswordSignInOff) {
		vm.Error = "Your team signs in through single sign-on only: use its button above."
		c.renderSignIn(w, r, http.StatusForbidden, vm)
		return
	}
	if err := c.signInAs(w, r, m, cmp.Or(vm.Next, Prefix+"/")); err != nil {
		c.fail(w, r, err)
	}
}

// giveBack releases attempt id under keys; a failure only leaves the
// attempt counted until the window ends.
func (c *Console) giveBack(ctx context.Context, id string, keys ...string) {
	if err := c.throttle.Release(context.WithoutCancel(ctx), id, keys...); err != nil {
		c.log.Warn("console: sign-in attempt not given back", "err", err)
	}
}

// tooMany answers an attempt refused by the throttle: 429, Retry-After and
// the sign-in page saying how long to wait.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, vm views.SignIn) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	vm.Error = fmt.Sprintf("Too many failed sign-ins. Try again in %d minutes.", max(int(wait.Round(time.Minute)/time.Minute), 1))
	c.renderSignIn(w, r, http.StatusTooManyRequests, vm)
}

// throttleFailed answers an attempt the throttle could not count (Redis
// unreachable): refused, since an uncounted attempt is an unlimited guess.
func (c *Console) throttleFailed(w http.ResponseWriter, r *http.Request, err error, vm views.SignIn) {
	c.log.Error("console: sign-in refused: the throttle is unavailable", "err", err)
	w.Header().Set("Retry-After", "5")
	vm.Error = "Sign-in is unavailable for a moment. Try again shortly."
	c.renderSignIn(w, r, http.StatusServiceUnavailable, vm)
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
