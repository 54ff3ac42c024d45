package console

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// The owners' alert webhooks page: the same store functions as the admin
// API's /webhooks, scoped to the viewer's team.

const flashNewWebhook = "flash_new_webhook" // a webhook just added, with its secret

func (c *Console) listWebhooks(w http.ResponseWriter, r *http.Request) {
	var section views.Webhooks
	var added views.NewWebhook
	if c.popFlash(w, r, flashNewWebhook, &added) {
		section.New = &added
	}
	c.renderWebhooks(w, r, http.StatusOK, section)
}

// createWebhook adds a webhook; a signed one's secret is shown once, after a
// redirect for a plain form post, so a reload adds none.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "name", "url", "format")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	section := views.Webhooks{Name: form.Get("name"), URL: form.Get("url"), Format: form.Get("format")}
	hook, err := c.st.CreateWebhook(ctx, v.actor(), v.team.ID, section.Name, section.URL, section.Format)
	if msg := validation(err); msg != "" {
		section.Error = msg
		c.renderWebhooks(w, r, http.StatusUnprocessableEntity, section)
		return
	} else if err != nil {
		c.fail(w, r, err)
		return
	}
	added := views.NewWebhook{Name: hook.Name, Format: hook.Format, Secret: hook.Secret}
	if !isHTMX(r) {
		c.putFlash(w, r, flashNewWebhook, added)
		http.Redirect(w, r, views.WebhooksURL, http.StatusSeeOther)
		return
	}
	c.renderWebhooks(w, r, http.StatusOK, views.Webhooks{New: &added})
}

// testWebhook queues a test alert; its outcome shows as the last delivery.
func (c *Console) testWebhook(w http.ResponseWriter, r *http.Request) {
	if _, err := readForm(w, r); err != nil {
		c.fail(w, r, err)
		return
	}
	v := viewerFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err == nil {
		err = c.st.TestWebhook(r.Context(), v.team.ID, id)
	} else {
		err = store.ErrNotFound
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !isHTMX(r) {
		http.Redirect(w, r, views.WebhooksURL, http.StatusSeeOther)
		return
	}
	c.renderWebhooks(w, r, http.StatusOK, views.Webhooks{Notice: "Test alert queued; reload to see how its delivery went."})
}

// deleteWebhook removes a webhook after a confirmation (the page works
// without JavaScript).
func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, "confirm")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	v := viewerFrom(ctx)
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		c.fail(w, r, store.ErrNotFound)
		return
	}
	if form.Get("confirm") != "yes" {
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(v, views.TabMembers),
			Title: "Delete this webhook?", Message: "Alerts still queued for it are dropped.",
			Action: r.URL.Path, Button: "Delete", Cancel: views.WebhooksURL}))
		return
	}
	if err := c.st.DeleteWebhook(ctx, v.actor(), v.team.ID, id); err != nil {
		c.fail(w, r, err)
		return
	}
	if !isHTMX(r) {
		http.Redirect(w, r, views.WebhooksURL, http.StatusSeeOther)
		return
	}
	c.renderWebhooks(w, r, http.StatusOK, views.Webhooks{})
}

// renderWebhooks answers with the webhooks section (HTMX) or its page,
// section's list filled from the store.
func (c *Console) renderWebhooks(w http.ResponseWriter, r *http.Request, status int, section views.Webhooks) {
	ctx := r.Context()
	v := viewerFrom(ctx)
	hooks, err := c.st.Webhooks(ctx, v.team.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	for _, h := range hooks {
		id := strconv.FormatInt(h.ID, 10)
		row := views.WebhookRow{ID: id, Name: h.Name, URL: h.URL, Format: h.Format, Last: "none yet",
			TestURL: views.WebhooksURL + "/" + id + "/test", DeleteURL: views.WebhooksURL + "/" + id + "/delete"}
		if d := h.Last; d != nil {
			switch {
			case d.DeliveredAt != nil:
				row.Last = d.Event + " delivered " + formatTime(*d.DeliveredAt)
			case d.FailedAt != nil:
				row.Last = d.Event + " gave up after " + strconv.Itoa(d.Attempts) + " attempts, " + formatTime(*d.FailedAt)
			case d.Attempts > 0:
				row.Last = d.Event + " retrying (" + strconv.Itoa(d.Attempts) + " attempts so far)"
			default:
				row.Last = d.Event + " queued"
			}
			row.LastError = d.LastError
		}
		section.Rows = append(section.Rows, row)
	}
	c.pageOrPartial(w, r, status, views.WebhooksPageView(views.WebhooksPage{Nav: nav(v, views.TabMembers), Section: section}),
		views.WebhooksSection(section))
}
