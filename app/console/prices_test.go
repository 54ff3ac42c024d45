package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/store"
)

func priceForm(kv ...string) url.Values {
	f := url.Values{"model": {"acme-large"}, "provider": {"other"}, "input": {"3"}, "output": {"15.000001"},
		"cache_write": {""}, "cache_write_1h": {""}, "cache_read": {"0.3"}, "max_output": {"8192"}}
	for i := 0; i < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func TestOwnerEditsPrices(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, _ := e.invite(owner, "ada@acme.test")
	ctx := t.Context()

	page := owner.get("/console/prices")
	seeded := page.doc.Find(`[data-testid="price-row"][data-model="claude-sonnet-4-5"]`)
	if page.status != http.StatusOK || seeded.Length() != 1 || page.has("prices-read-only") || !page.has("price-form") {
		t.Fatalf("prices page: %d, seeded row %d", page.status, seeded.Length())
	}
	if got := seeded.Find(`[data-testid="price-input"]`).Text(); got != "$3.00" {
		t.Errorf("claude-sonnet-4-5 input shows %q, want $3.00", got)
	}

	// A new model: confirm first, then saved exactly, audited.
	before := e.auditCount()
	if r := owner.post("/console/prices", priceForm()); !r.has("confirm") || e.auditCount() != before {
		t.Fatalf("unconfirmed price: %d", r.status)
	}
	wantRedirect(t, "add a price", owner.post("/console/prices", priceForm("confirm", "yes")), "/console/prices?saved=acme-large")
	p, err := e.st.Price(ctx, "acme-large")
	if err != nil {
		t.Fatal(err)
	}
	if p.InputPerMTok != 3_000_000 || p.OutputPerMTok != 15_000_001 || p.CacheReadPerMTok != 300_000 || p.MaxOutputTokens != 8192 {
		t.Errorf("saved price = %+v", p)
	}
	if e.auditCount() != before+1 {
		t.Errorf("audit rows +%d, want 1", e.auditCount()-before)
	}
	if r := owner.get("/console/prices?saved=acme-large"); r.text("price-saved") == "" {
		t.Error("no saved notice")
	}
	if r := owner.get("/console/prices?saved=<b>pwned"); r.has("price-saved") {
		t.Error("a crafted link names a model that is not in the list")
	}

	// Edit an existing model: the page is filled in; the change keeps the rest.
	edit := owner.get("/console/prices/edit?model=claude-sonnet-4-5")
	if edit.status != http.StatusOK || edit.doc.Find(`#input`).AttrOr("value", "") != "3.00" {
		t.Fatalf("edit page: %d, input %q", edit.status, edit.doc.Find(`#input`).AttrOr("value", ""))
	}
	wantRedirect(t, "change a price", owner.post("/console/prices", priceForm("confirm", "yes", "model", "claude-sonnet-4-5",
		"provider", "anthropic", "input", "2.5", "output", "15", "max_output", "64000")), "/console/prices?saved=claude-sonnet-4-5")
	if p, _ := e.st.Price(ctx, "claude-sonnet-4-5"); p.InputPerMTok != 2_500_000 || p.Provider != "anthropic" {
		t.Errorf("changed price = %+v", p)
	}
	if r := owner.get("/console/prices/edit?model=no-such-model"); r.status != http.StatusNotFound {
		t.Errorf("edit an unknown model: %d, want 404", r.status)
	}

	// Refused: amounts finer than a micro-dollar, not numbers, no model.
	before = e.auditCount()
	for name, form := range map[string]url.Values{
		"finer than µ$":   priceForm("input", "3.0000001"),
		"not a number":    priceForm("output", "fifteen"),
		"negative":        priceForm("input", "-1"),
		"no model":        priceForm("model", ""),
		"no max output":   priceForm("max_output", "0"),
		"model has space": priceForm("model", "a b"),
	} {
		form.Set("confirm", "yes")
		if r := owner.post("/console/prices", form); r.status != http.StatusUnprocessableEntity || r.text("form-error") == "" {
			t.Errorf("%s: %d, message %q; want 422", name, r.status, r.text("form-error"))
		}
	}
	if e.auditCount() != before {
		t.Errorf("refused prices wrote %d audit rows", e.auditCount()-before)
	}
	if r := owner.post("/console/prices", priceForm("confirm", "yes", "tier_threshold", "1")); r.status != http.StatusBadRequest {
		t.Errorf("extra field: %d, want 400", r.status)
	}
	if r := ada.post("/console/prices", priceForm("confirm", "yes")); r.status != http.StatusForbidden {
		t.Errorf("member sets a price: %d, want 403", r.status)
	}

	// Once a second team shares the gateway, prices are the operator's.
	if _, err := e.st.CreateTeam(ctx, store.ActorCLI, "globex"); err != nil {
		t.Fatal(err)
	}
	if r := owner.get("/console/prices"); !r.has("prices-read-only") || r.has("price-form") {
		t.Error("shared prices are still editable on the page")
	}
	if r := owner.post("/console/prices", priceForm("confirm", "yes", "input", "0")); r.status != http.StatusForbidden {
		t.Errorf("owner of one of two teams sets a price: %d, want 403", r.status)
	}
	if p, _ := e.st.Price(ctx, "acme-large"); p.InputPerMTok != 3_000_000 {
		t.Error("a refused price change was written")
	}
}

// TestPricesSearch: a GET form narrows the long list by a part of the model's
// name and by provider, and says how many of how many match.
func TestPricesSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	all := owner.get("/console/prices")
	total := all.doc.Find(`[data-testid="price-row"]`).Length()
	if all.has("price-count") || !all.has("price-search") || total < 100 {
		t.Fatalf("the whole list: %d rows, count shown %v", total, all.has("price-count"))
	}
	models := func(r response) []string {
		var m []string
		r.doc.Find(`[data-testid="price-row"]`).Each(func(_ int, s *goquery.Selection) { m = append(m, s.AttrOr("data-model", "")) })
		return m
	}
	sonnet := owner.get("/console/prices?q=SONNET-4&provider=")
	got := models(sonnet)
	if len(got) == 0 || len(got) >= total || !slices.Contains(got, "claude-sonnet-4-5") {
		t.Fatalf("search sonnet-4: %v", got)
	}
	for _, m := range got {
		if !strings.Contains(m, "sonnet-4") {
			t.Errorf("search sonnet-4 lists %s", m)
		}
	}
	if want := strconv.Itoa(len(got)) + " of " + strconv.Itoa(total) + " models match."; sonnet.text("price-count") != want {
		t.Errorf("the count says %q, want %q", sonnet.text("price-count"), want)
	}
	if v := sonnet.doc.Find("#price-q").AttrOr("value", ""); v != "SONNET-4" {
		t.Errorf("the search box holds %q", v)
	}
	for _, m := range models(owner.get("/console/prices?provider=openai")) {
		if strings.HasPrefix(m, "claude") {
			t.Errorf("provider openai lists %s", m)
		}
	}
	if r := owner.get("/console/prices?q=no-such-model"); !r.has("no-prices") || len(models(r)) != 0 {
		t.Error("a search matching nothing does not say so")
	}
}
