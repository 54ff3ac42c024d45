package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Key actions. A member acts on their own keys; an owner on any key of the
// team. Any other key id is 404, exactly like one that does not exist.

func (c *Console) showHome(w http.ResponseWriter, r *http.Request) {
	m := viewerFrom(r.Context()).member
	c.renderKeys(w, r, http.StatusOK, m, c.popNewKeyOf(w, r, m.ID), "")
}

// createKey issues a key to the viewer. The form takes a name and nothing else:
// which member, limits and routes are never the caller's to choose.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "name")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	issued, err := c.st.IssueKey(r.Context(), v.actor(), v.team.ID, v.member.ID, form.Get("name"))
	c.afterKeyChange(w, r, v.member, &issued, err)
}

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request) {
	c.confirmedKeyAction(w, r, func(k store.Key) (string, string, string) {
		return "Rotate key " + k.ID + "?", "You get a new key, shown once. The old key keeps working until " +
			formatTime(time.Now().Add(c.grace)) + ", then it is refused.", "Rotate"
	}, func(v *viewer, k store.Key) (*store.IssuedKey, error) {
		issued, err := c.st.RotateKey(r.Context(), v.actor(), v.team.ID, k.ID, c.grace)
		return &issued, err
	})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	c.confirmedKeyAction(w, r, func(k store.Key) (string, string, string) {
		return "Revoke key " + k.ID + "?", "Calls with this key are refused at once. This cannot be undone.", "Revoke"
	}, func(v *viewer, k store.Key) (*store.IssuedKey, error) {
		_, err := c.st.RevokeKey(r.Context(), v.actor(), v.team.ID, k.ID)
		return nil, err
	})
}

// confirmedKeyAction is what rotate and revoke share: read the one-field form,
// find a key the viewer may act on, ask for confirmation (the page works without
// JavaScript), then act and re-render.
func (c *Console) confirmedKeyAction(w http.ResponseWriter, r *http.Request, confirm func(store.Key) (title, body, button string),
	act func(*viewer, store.Key) (*store.IssuedKey, error)) {
	form, err := readForm(w, r, "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	k, m, err := c.visibleKey(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if form.Get("confirm") != "yes" {
		title, body, button := confirm(k)
		c.confirmKey(w, r, title, body, button)
		return
	}
	issued, err := act(viewerFrom(r.Context()), k)
	c.afterKeyChange(w, r, m, issued, err)
}

// visibleKey finds the {id} key of the path if the viewer may act on it, with
// the member it belongs to.
func (c *Console) visibleKey(r *http.Request) (store.Key, store.Member, error) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	keys, err := c.st.Keys(ctx, v.team.ID)
	if err != nil {
		return store.Key{}, store.Member{}, err
	}
	i := slices.IndexFunc(keys, func(k store.Key) bool { return k.ID == chi.URLParam(r, "id") })
	if i < 0 || (keys[i].MemberID != v.member.ID && !v.owner()) {
		return store.Key{}, store.Member{}, store.ErrNotFound
	}
	m, err := c.st.FindMember(ctx, v.team.ID, strconv.FormatInt(keys[i].MemberID, 10))
	return keys[i], m, err
}

func (c *Console) confirmKey(w http.ResponseWriter, r *http.Request, title, message, button string) {
	v := viewerFrom(r.Context())
	c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabKeys), Title: title,
		Message: message, Action: r.URL.Path, Button: button, Cancel: Prefix + "/"}))
}

// afterKeyChange shows member m's keys after a write: a refused write with its
// message (422 for a bad name; 409 for a key another call already rotated or
// revoked), a new key with its plaintext, which is never stored and so never
// shown again. HTMX swaps no 409, so there the funnel answers it with the one
// line console.js shows.
func (c *Console) afterKeyChange(w http.ResponseWriter, r *http.Request, m store.Member, issued *store.IssuedKey, err error) {
	status, msg := http.StatusOK, ""
	if msg = validation(err); msg != "" {
		status = http.StatusUnprocessableEntity
	} else if s, ok := errors.AsType[*store.StateError](err); ok && !isHTMX(r) {
		status, msg = http.StatusConflict, s.Message
	} else if err != nil {
		c.fail(w, r, err)
		return
	}
	if msg != "" {
		issued = nil
	} else if !isHTMX(r) {
		// The page that shows the result is fetched with a GET, so a reload
		// does not issue another key; the new key's plaintext goes with it once.
		if issued != nil {
			c.putFlash(w, r, flashNewKey, issued)
		}
		http.Redirect(w, r, keysPageURL(viewerFrom(r.Context()), m), http.StatusSeeOther)
		return
	}
	c.renderKeys(w, r, status, m, issued, msg)
}

// keysPageURL is where member m's keys are shown to the viewer.
func keysPageURL(v *viewer, m store.Member) string {
	if m.ID == v.member.ID {
		return Prefix + "/"
	}
	return memberURL(m.ID)
}

// renderKeys renders member m's keys: the section for HTMX, else the page it
// sits in (the viewer's own page, or an owner's view of m).
func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, status int, m store.Member, issued *store.IssuedKey, msg string) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	if m.ID != v.member.ID {
		vm, err := c.memberPage(ctx, m, issued, msg)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		c.pageOrPartial(w, r, status, views.MemberPage(vm), views.KeysSection(vm.Keys))
		return
	}
	keys, err := c.keysSection(ctx, m, issued, msg)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if isHTMX(r) {
		c.render(w, r, status, views.KeysSection(keys))
		return
	}
	routes, err := c.st.Routes(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// Routes that forward first: the first snippet, the one shown open, is one
	// that works.
	var snippetRoutes []views.SnippetRoute
	for _, rt := range routes {
		sr := views.SnippetRoute{Prefix: rt.Prefix, Dialect: rt.Dialect}
		if !c.routeWorks(rt) {
			sr.MissingCredential = rt.CredentialEnv
		}
		snippetRoutes = append(snippetRoutes, sr)
	}
	slices.SortStableFunc(snippetRoutes, func(a, b views.SnippetRoute) int {
		switch aWorks, bWorks := a.MissingCredential == "", b.MissingCredential == ""; {
		case aWorks == bWorks:
			return 0
		case aWorks:
			return -1
		}
		return 1
	})
	var checklist *views.Checklist
	if v.owner() {
		if checklist, err = c.checklist(ctx, v.team.ID); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	figs, err := c.readMemberFigures(ctx, v.team.ID, m.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	usage := c.usageView(ctx, v.team.ID, m.ID, figs, true)
	budget, err := c.budgetAsk(ctx, v.team.ID, m.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	home := views.Home{Budget: budget, Nav: nav(v, views.TabKeys), Checklist: checklist, Disabled: m.Status != store.StatusActive, Keys: keys,
		Usage: &usage, Snippets: views.Snippets(c.publicURL, snippetRoutes)}
	c.render(w, r, status, views.HomePage(home))
}

// keysSection is member m's keys, newest first, as the viewer may act on them.
func (c *Console) keysSection(ctx context.Context, m store.Member, issued *store.IssuedKey, msg string) (views.Keys, error) {
	v := viewerFrom(ctx)
	keys, err := c.st.Keys(ctx, v.team.ID)
	if err != nil {
		return views.Keys{}, err
	}
	used, err := c.st.KeysLastUsed(ctx, v.team.ID)
	if err != nil {
		return views.Keys{}, err
	}
	active := m.Status == store.StatusActive
	now := time.Now()
	vm := views.Keys{Own: m.ID == v.member.ID, Disabled: !active, CreateURL: Prefix + "/keys", Error: msg,
		GraceEnd: formatTime(now.Add(c.grace))}
	if issued != nil {
		vm.New = &views.NewKey{ID: issued.ID, Plaintext: issued.Plaintext}
	}
	for _, k := range slices.Backward(keys) {
		if k.MemberID != m.ID {
			continue
		}
		url := Prefix + "/keys/" + k.ID
		row := views.KeyRow{ID: k.ID, Name: k.Name, State: k.State(now), Created: formatTime(k.CreatedAt), LastUsed: "never"}
		if at, ok := used[k.ID]; ok {
			row.LastUsed = formatTime(at)
		}
		if row.State == "grace" {
			row.Until = formatTime(*k.ExpiresAt)
		}
		if row.State == "active" && active {
			row.RotateURL = url + "/rotate"
		}
		if keyWorks(row.State) {
			row.RevokeURL = url + "/revoke"
		}
		if vm.New != nil && k.ReplacedBy != nil && *k.ReplacedBy == issued.ID {
			vm.New.Replaces, vm.New.OldUntil = k.ID, row.Until
			if row.State == "revoked" {
				vm.New.OldUntil = "now (revoked)"
			}
		}
		vm.Rows = append(vm.Rows, row)
	}
	return vm, nil
}

// keyWorks reports whether a key in state still authenticates.
func keyWorks(state string) bool { return state == "active" || state == "grace" }
