package console

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/a-h/templ"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// isHTMX reports whether HTMX made the request, so the answer is the partial
// it swaps rather than a whole page.
func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// isEventStream reports whether the browser's EventSource made the request.
func isEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// render writes a component in full or not at all: it is rendered to a buffer
// first, so a failure mid-way becomes a clean 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page templ.Component) {
	var buf bytes.Buffer
	if err := page.Render(r.Context(), &buf); err != nil {
		c.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Add("Vary", "HX-Request")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageOrPartial renders the partial for HTMX and the whole page otherwise.
func (c *Console) pageOrPartial(w http.ResponseWriter, r *http.Request, status int, page, partial templ.Component) {
	if isHTMX(r) {
		c.render(w, r, status, partial)
		return
	}
	c.render(w, r, status, page)
}

// errBadForm is a form with fields its handler does not take.
var errBadForm = errors.New("unexpected form field")

// fail is the one error funnel: not found → 404, a bad form → 400, a store
// conflict or a change another call made first (StateError, with its message)
// → 409, anything else → 500 with a log line and a reference the person can
// quote. Handlers re-render their form with a validation error's message
// (422); the one that gets here is readForm's, a value that is not UTF-8,
// answered 422 with its message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	if s, ok := errors.AsType[*store.StateError](err); ok {
		c.failWith(w, r, http.StatusConflict, "Already changed", s.Message)
		return
	}
	if v, ok := errors.AsType[*store.ValidationError](err); ok {
		c.failWith(w, r, http.StatusUnprocessableEntity, "Not accepted", v.Message+".")
		return
	}
	if f, ok := errors.AsType[*store.ForbiddenError](err); ok {
		c.failWith(w, r, http.StatusForbidden, "Not allowed", f.Message)
		return
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.failWith(w, r, http.StatusNotFound, "Not found", "There is nothing here, or it is not yours.")
	case errors.Is(err, errBadForm):
		c.failWith(w, r, http.StatusBadRequest, "Bad request", "The form had fields this page does not take.")
	case errors.Is(err, store.ErrConflict):
		c.failWith(w, r, http.StatusConflict, "Already exists", "That already exists.")
	default:
		ref := rand.Text()[:10]
		c.log.Error("console request failed", "err", err, "method", r.Method, "path", r.URL.Path, "ref", ref)
		c.failWith(w, r, http.StatusInternalServerError, "Something went wrong",
			"The console could not do that. Reference "+ref+" is in the server log.")
	}
}

// failWith answers with status and a message: one line of text for HTMX (which
// does not swap errors; console.js shows the line), a page otherwise.
func (c *Console) failWith(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	if isHTMX(r) || isEventStream(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		w.Write([]byte(message))
		return
	}
	var buf bytes.Buffer
	views.ErrorPage(title, message).Render(r.Context(), &buf)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// maxFormBytes bounds a console form body.
const maxFormBytes = 64 << 10

// readForm parses a posted form and refuses any field the handler does not
// take: a member cannot slip limits, routes or someone else's id into a request
// that only takes a key name. A value that is not UTF-8 is refused here, for
// every form, as the store refuses it in a name (a validation error naming the
// field, which fail answers 422).
func readForm(w http.ResponseWriter, r *http.Request, allowed ...string) (url.Values, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return nil, errBadForm
	}
	for name, values := range r.PostForm {
		if !slices.Contains(allowed, name) {
			return nil, errBadForm
		}
		for _, v := range values {
			if err := store.CheckUTF8(name, "the field "+name, v); err != nil {
				return nil, err
			}
		}
	}
	return r.PostForm, nil
}

// utf8Address refuses a path or query parameter that is not UTF-8, as
// readForm refuses such a form value: a name in the address (a tier's, a
// model's) would otherwise reach Postgres, which answers with an error of its
// own (a 500).
func (c *Console) utf8Address(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := store.CheckUTF8("path", "the address", r.URL.Path); err != nil {
			c.fail(w, r, err)
			return
		}
		for name, values := range r.URL.Query() {
			for _, v := range append([]string{name}, values...) {
				if err := store.CheckUTF8(name, "the parameter "+name, v); err != nil {
					c.fail(w, r, err)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// validation returns the message of a store validation error, or "".
func validation(err error) string {
	if v, ok := errors.AsType[*store.ValidationError](err); ok {
		return v.Message
	}
	return ""
}
