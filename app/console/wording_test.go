package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// shownWords is what a page says: its text, and the attributes read aloud or
// shown as tooltips. Form values and class names are not words on the page.
func shownWords(doc *goquery.Document) string {
	var b strings.Builder
	b.WriteString(doc.Find("body").Text())
	doc.Find("[title], [aria-label], [placeholder], [alt], [hx-confirm]").Each(func(_ int, s *goquery.Selection) {
		for _, a := range []string{"title", "aria-label", "placeholder", "alt", "hx-confirm"} {
			b.WriteString(" " + s.AttrOr(a, ""))
		}
	})
	return b.String()
}

var disabledWord = regexp.MustCompile(`(?i)\bdisabled\b`)

// TestCutOffIsCalledCutOffEverywhere: a member an owner cut off is "Cut off"
// (a label) or "cut off" (in a sentence) on every page that shows them, never
// "disabled", the word the database stores.
func TestCutOffIsCalledCutOffEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, m := e.invite(owner, "ada@acme.test")
	keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))
	adaURL := "/console/members/" + strconv.FormatInt(m.ID, 10)
	wantRedirect(t, "cut off", owner.post(adaURL+"/status", url.Values{"status": {"disabled"}, "confirm": {"yes"}}), "/console/members")

	pages := map[string]response{
		"members":        owner.get("/console/members"),
		"member":         owner.get(adaURL),
		"dashboard":      owner.get("/console/dashboard"),
		"audit":          owner.get("/console/audit"),
		"member's home":  e.signIn("ada@acme.test").get("/console/"), // the cut-off ended her session
		"confirm cutoff": owner.post(adaURL+"/status", url.Values{"status": {"disabled"}}),
	}
	for name, r := range pages {
		wantStatus(t, name, r, http.StatusOK)
		words := shownWords(r.doc)
		if disabledWord.MatchString(words) {
			t.Errorf("%s calls a member state %q: %s", name, "disabled", disabledWord.FindString(words))
		}
		if !strings.Contains(strings.ToLower(words), "cut off") {
			t.Errorf("%s does not say the member is cut off", name)
		}
	}
	for name, css := range map[string]string{"members": `tr[data-email="ada@acme.test"] [data-testid="member-status"]`,
		"member": `[data-testid="member-status"]`, "dashboard": `tr[data-email="ada@acme.test"] [data-testid="live-status"]`} {
		if got := strings.TrimSpace(pages[name].doc.Find(css).Text()); got != "Cut off" {
			t.Errorf("%s labels ada %q, want Cut off", name, got)
		}
	}
}
