package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/views"
)

// Owners read and set model prices (dollars per million tokens, parsed exactly)
// through store.SetPrice, as `tollgate admin set-price` does. Prices are the
// gateway's, not one team's: where several teams share the gateway, only the
// operator may change them, so one team's owner cannot reprice another's spend.

var priceFields = []string{"model", "provider", "input", "output", "cache_write", "cache_write_1h", "cache_read", "max_output", "confirm"}

func (c *Console) listPrices(w http.ResponseWriter, r *http.Request) {
	saved := r.URL.Query().Get("saved")
	c.renderPrices(w, r, http.StatusOK, views.PriceForm{}, saved)
}

func (c *Console) renderPrices(w http.ResponseWriter, r *http.Request, status int, form views.PriceForm, saved string) {
	ctx := r.Context()
	prices, err := c.st.Prices(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	shared, err := c.pricesShared(ctx)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// The list is long (every model of every provider): a GET form narrows it
	// by a part of the model's name and by provider, without JavaScript.
	query := r.URL.Query()
	vm := views.Prices{Nav: nav(viewerFrom(ctx), views.TabPrices), ReadOnly: shared, Total: len(prices),
		Query: strings.TrimSpace(query.Get("q")), Provider: query.Get("provider")}
	for _, p := range prices {
		if !slices.Contains(vm.Providers, p.Provider) {
			vm.Providers = append(vm.Providers, p.Provider)
		}
		if (vm.Provider == "" || p.Provider == vm.Provider) && strings.Contains(strings.ToLower(p.Model), strings.ToLower(vm.Query)) {
			vm.Rows = append(vm.Rows, priceRow(p))
		}
	}
	slices.Sort(vm.Providers)
	// Only a model in the list is named as saved, so a crafted link cannot put
	// words on the page.
	if slices.ContainsFunc(prices, func(p store.Price) bool { return p.Model == saved }) {
		vm.Saved = saved
	}
	form.Action = Prefix + "/prices"
	vm.Form = form
	c.render(w, r, status, views.PricesPage(vm))
}

// pricesShared reports whether several teams use this gateway's prices.
func (c *Console) pricesShared(ctx context.Context) (bool, error) {
	teams, err := c.st.Teams(ctx)
	return len(teams) > 1, err
}

func priceRow(p store.Price) views.PriceRow {
	row := views.PriceRow{Model: p.Model, Provider: p.Provider, Input: perMTok(p.InputPerMTok), Output: perMTok(p.OutputPerMTok),
		CacheWrite: perMTok(p.CacheWritePerMTok), CacheWrite1h: perMTok(p.CacheWrite1hPerMTok), CacheRead: perMTok(p.CacheReadPerMTok),
		MaxOutput: strconv.FormatInt(p.MaxOutputTokens, 10), EditURL: Prefix + "/prices/edit?model=" + url.QueryEscape(p.Model)}
	if p.TierThreshold > 0 {
		row.Tier = fmt.Sprintf("above %d input tokens: %s in, %s out (tiers are set with tollgate admin set-price)",
			p.TierThreshold, perMTok(p.TierInputPerMTok), perMTok(p.TierOutputPerMTok))
	}
	return row
}

func perMTok(micros int64) string { return "$" + store.FormatDollars(micros) }

func (c *Console) showPrice(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := c.st.Price(ctx, r.URL.Query().Get("model"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if shared, err := c.pricesShared(ctx); err != nil || shared {
		c.refusePriceChange(w, r, err)
		return
	}
	c.renderPriceEdit(w, r, http.StatusOK, priceForm(p))
}

func (c *Console) renderPriceEdit(w http.ResponseWriter, r *http.Request, status int, f views.PriceForm) {
	f.Action, f.Edit = Prefix+"/prices", true
	c.render(w, r, status, views.PriceEditPage(views.PriceEdit{Nav: nav(viewerFrom(r.Context()), views.TabPrices), Form: f}))
}

func (c *Console) refusePriceChange(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.failWith(w, r, http.StatusForbidden, "Prices are shared",
		"Several teams share this gateway's prices, so only its operator changes them (tollgate admin set-price).")
}

// setPrice adds a model's price or changes one, after a confirmation page. A
// changed model keeps its long-context tier, which only the CLI sets.
func (c *Console) setPrice(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r, priceFields...)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ctx := r.Context()
	if shared, err := c.pricesShared(ctx); err != nil || shared {
		c.refusePriceChange(w, r, err)
		return
	}
	posted := postedPriceForm(form)
	existing, err := c.st.Price(ctx, strings.TrimSpace(form.Get("model")))
	switch {
	case errors.Is(err, store.ErrNotFound):
		existing = store.Price{}
	case err != nil:
		c.fail(w, r, err)
		return
	}
	reject := func(msg string) {
		posted.Error = msg
		if existing.Model != "" {
			c.renderPriceEdit(w, r, http.StatusUnprocessableEntity, posted)
			return
		}
		c.renderPrices(w, r, http.StatusUnprocessableEntity, posted, "")
	}
	p, msg := parsePrice(form, existing)
	if msg != "" {
		reject(msg)
		return
	}
	if form.Get("confirm") != "yes" {
		fields := map[string]string{}
		for _, name := range priceFields[:len(priceFields)-1] {
			fields[name] = form.Get(name)
		}
		verb := "Add"
		if existing.Model != "" {
			verb = "Change"
		}
		c.render(w, r, http.StatusOK, views.ConfirmPage(views.Confirm{Nav: nav(viewerFrom(ctx), views.TabPrices),
			Title:   verb + " the price of " + p.Model + "?",
			Message: describePrice(p) + " Every request from the next one on is held and settled at this price.",
			Action:  r.URL.Path, Fields: fields, Button: "Save price", Cancel: Prefix + "/prices", Primary: true}))
		return
	}
	saved, err := c.st.SetPrice(ctx, viewerFrom(ctx).actor(), p)
	if msg := validation(err); msg != "" {
		reject(msg)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, Prefix+"/prices?saved="+url.QueryEscape(saved.Model), http.StatusSeeOther)
}

// parsePrice reads the price form over existing (the model's current price, or
// zero): dollar amounts per million tokens exactly, by store.ParseDollars.
func parsePrice(form url.Values, existing store.Price) (store.Price, string) {
	p := existing
	p.Model, p.Provider = strings.TrimSpace(form.Get("model")), strings.TrimSpace(form.Get("provider"))
	p.TakenOn = time.Time{} // today: the owner just set it
	if p.Model == "" {
		return p, "Name the model, as its API names it."
	}
	for _, f := range []struct {
		name, label string
		dst         *int64
		required    bool
	}{
		{"input", "Input", &p.InputPerMTok, true}, {"output", "Output", &p.OutputPerMTok, true},
		{"cache_write", "Cache write", &p.CacheWritePerMTok, false}, {"cache_write_1h", "Cache write 1h", &p.CacheWrite1hPerMTok, false},
		{"cache_read", "Cache read", &p.CacheReadPerMTok, false},
	} {
		v := strings.TrimSpace(form.Get(f.name))
		if v == "" && !f.required {
			*f.dst = 0
			continue
		}
		micros, err := store.ParseDollars(v)
		if err != nil {
			return p, f.label + ": " + err.Error() + "."
		}
		*f.dst = micros
	}
	n, err := strconv.ParseInt(strings.TrimSpace(form.Get("max_output")), 10, 64)
	if err != nil || n < 1 {
		return p, "Max output tokens must be a whole number of at least 1."
	}
	p.MaxOutputTokens = n
	return p, ""
}

func describePrice(p store.Price) string {
	return fmt.Sprintf("Per million tokens: input %s, output %s, cache write %s (1h: %s), cache read %s; at most %d output tokens held.",
		perMTok(p.InputPerMTok), perMTok(p.OutputPerMTok), perMTok(p.CacheWritePerMTok), perMTok(p.CacheWrite1hPerMTok),
		perMTok(p.CacheReadPerMTok), p.MaxOutputTokens)
}

func priceForm(p store.Price) views.PriceForm {
	return views.PriceForm{Model: p.Model, Provider: p.Provider, Input: store.FormatDollars(p.InputPerMTok),
		Output: store.FormatDollars(p.OutputPerMTok), CacheWrite: store.FormatDollars(p.CacheWritePerMTok),
		CacheWrite1h: store.FormatDollars(p.CacheWrite1hPerMTok), CacheRead: store.FormatDollars(p.CacheReadPerMTok),
		MaxOutput: strconv.FormatInt(p.MaxOutputTokens, 10), TakenOn: takenOn(p.TakenOn)}
}

func takenOn(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.DateOnly)
}

func postedPriceForm(form url.Values) views.PriceForm {
	return views.PriceForm{Model: form.Get("model"), Provider: form.Get("provider"), Input: form.Get("input"),
		Output: form.Get("output"), CacheWrite: form.Get("cache_write"), CacheWrite1h: form.Get("cache_write_1h"),
		CacheRead: form.Get("cache_read"), MaxOutput: form.Get("max_output")}
}
