package console_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/app/store"
)

// TestBrowserConsoleFits opens every console page an owner and a member can
// reach, with a budget request waiting, in Chromium at a phone's size and a
// laptop's, as a team lead found them: the page must not scroll sideways,
// every nav link must be on screen and take a click, no link, button, field,
// badge or column heading may be cut off by the window or by a box it sits
// in, Approve and Decline must be reachable, and no page may break the
// Content-Security-Policy or log an error. At the phone's size the owner
// then approves the request with a tap. The owner's pages are found by
// following the console's own links from the nav, so a page added later is
// checked too.
func TestBrowserConsoleFits(t *testing.T) {
	t.Parallel()
	needChromium(t)
	j := startJourney(t)
	ctx := t.Context()

	// A team as the issue's lead had it: a route, a tier, a member with a
	// long address, a key and a budget, and that member's request waiting.
	token, _, err := j.st.CreateSetupLink(ctx, store.ActorCLI)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := j.st.CompleteSetup(ctx, token, "acme", "owner@acme.test", password)
	if err != nil {
		t.Fatal(err)
	}
	by := store.MemberActor(owner.ID)
	const email = "ada.lovelace-byron@analytical-engine.example"
	invite, _, err := j.st.CreateInvite(ctx, by, owner.TeamID, email, store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	ada, err := j.st.AcceptInvite(ctx, invite, password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.st.IssueKey(ctx, store.MemberActor(ada.ID), owner.TeamID, ada.ID, "laptop"); err != nil {
		t.Fatal(err)
	}
	budget := int64(5_000_000)
	if _, err := j.st.CreateTier(ctx, by, owner.TeamID, store.Tier{Name: "hackers", Weight: 1,
		Limits: store.Limits{Budget: &budget, BudgetPeriod: "monthly", RatePeriod: time.Second}}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.st.AssignTier(ctx, by, owner.TeamID, ada.ID, "hackers"); err != nil {
		t.Fatal(err)
	}
	asked, err := j.st.RequestBudget(ctx, store.MemberActor(ada.ID), owner.TeamID, ada.ID, 20_000_000,
		"the evaluation run for the workshop paper needs the large model on all 4,000 prompts, twice")
	if err != nil {
		t.Fatal(err)
	}

	ownerTab, memberTab := j.tab(t), j.tab(t)
	j.signIn(t, ownerTab, "owner@acme.test")
	j.do(t, ownerTab, "add a route",
		chromedp.Navigate(j.url+"/console/routes"),
		chromedp.SendKeys(chromedp.ID("upstream"), j.mockURL),
		chromedp.Submit(chromedp.ID("upstream")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="route-row"]`)))
	j.signIn(t, memberTab, email)

	pages := j.consolePages(t, ownerTab)
	for _, want := range []string{"/console/dashboard", "/console/members", "/console/members/N", "/console/routes/N",
		"/console/tiers/hackers", "/console/team/sign-in", "/console/team/tokens"} {
		if _, ok := pages[want]; !ok {
			t.Errorf("no link reaches %s from the owner's pages (found %v)", want, pages)
		}
	}
	for _, width := range []int64{390, 1024, 1280} {
		for _, path := range pages {
			j.fits(t, ownerTab, width, path)
		}
		j.fits(t, memberTab, width, "/console/")
		j.approvable(t, ownerTab, width)
		j.navClickable(t, ownerTab, width)
	}

	// A tap on Approve at the phone's size applies it.
	j.emulate(t, ownerTab, 390)
	j.do(t, ownerTab, "approve at a phone's size",
		chromedp.Navigate(j.url+"/console/dashboard"),
		chromedp.Click(chromedp.CSS(`[data-testid="budget-request"] form[action$="/approve"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pending-requests"] p.muted`)))
	mine, err := j.st.MemberBudgetRequests(ctx, owner.TeamID, ada.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 1 || mine[0].ID != asked.ID || mine[0].Status != "approved" {
		t.Errorf("after the tap on Approve ada's requests are %+v, want the one approved", mine)
	}
	j.emulate(t, ownerTab, 1280)
}

// needChromium skips a browser test on a machine without Chromium, unless the
// run is CI's or make screenshots', where it is required.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "" && os.Getenv("SCREENSHOT_DIR") == "" {
			t.Skipf("no %s; install Debian's chromium package to run the browser tests", chromium)
		}
		t.Fatalf("%s is missing (CI or make screenshots): %v", chromium, err)
	}
}

// signIn signs email in through the sign-in form.
func (j *journey) signIn(t *testing.T, tab context.Context, email string) {
	t.Helper()
	j.do(t, tab, "sign in "+email,
		chromedp.Navigate(j.url+"/console/signin"),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="whoami"]`)))
}

// consolePages follows the console's links from the owner's nav, breadth
// first, and returns one address for each page: ids in a path are one page
// ("/console/members/N"), and so are the addresses that differ only in their
// query string (a price's edit form per model).
func (j *journey) consolePages(t *testing.T, tab context.Context) map[string]string {
	t.Helper()
	pages := map[string]string{}
	queue := []string{"/console/"}
	for len(queue) > 0 && len(pages) < 40 {
		path := queue[0]
		queue = queue[1:]
		j.do(t, tab, "open "+path, chromedp.Navigate(j.url+path), chromedp.WaitReady(chromedp.CSS("main")))
		links, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('a[href^="/console/"]')]
			.map(a => new URL(a.href)).filter(u => u.pathname !== "/console/signin").map(u => u.pathname + u.search)`))
		if err != nil {
			t.Fatalf("links of %s: %v", path, err)
		}
		for _, l := range links {
			key := pageKey(strings.SplitN(l, "?", 2)[0])
			if _, seen := pages[key]; !seen {
				pages[key] = l
				queue = append(queue, l)
			}
		}
	}
	return pages
}

// pageKey is path with each numeric segment as N.
func pageKey(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			parts[i] = "N"
		}
	}
	return strings.Join(parts, "/")
}

// emulate sizes the tab as a phone (390 wide) or a laptop of width by 800.
func (j *journey) emulate(t *testing.T, tab context.Context, width int64) {
	t.Helper()
	if width == 390 {
		j.do(t, tab, "emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	} else {
		j.do(t, tab, "emulate a laptop", chromedp.EmulateViewport(width, 800))
	}
}

// cutOff finds what the person cannot see whole on the page as it is: the
// page wider than the window, and every link, button, field, badge or column
// heading that reaches past the window or past a box that clips or scrolls it
// (a table scrolling in its box counts: its far columns are off screen). Text
// for screen readers only (clip-path) is clipped on purpose and skipped.
const cutOff = `((width) => {
	const out = [];
	if (document.documentElement.scrollWidth > width) {
		out.push("the page is " + document.documentElement.scrollWidth + "px wide");
	}
	const hidden = el => { for (let a = el; a; a = a.parentElement) if (getComputedStyle(a).clipPath !== "none") return true; return false; };
	const name = el => el.tagName.toLowerCase() + (el.dataset.testid ? "[" + el.dataset.testid + "]" : "") +
		' "' + (el.innerText || el.value || el.placeholder || "").trim().slice(0, 30) + '"';
	for (const el of document.querySelectorAll("a, button, input, select, summary, .badge, th")) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || el.closest("pre") || hidden(el)) continue;
		if (r.left < -0.5 || r.right > width + 0.5) {
			out.push(name(el) + " reaches " + Math.round(r.left) + "–" + Math.round(r.right) + "px");
			continue;
		}
		for (let a = el.parentElement; a; a = a.parentElement) {
			if (getComputedStyle(a).overflowX === "visible") continue;
			const b = a.getBoundingClientRect();
			if (r.left < b.left - 0.5 || r.right > b.right + 0.5) {
				out.push(name(el) + " is cut off by its " + a.tagName.toLowerCase() + "." + a.className);
				break;
			}
		}
		if (el.tagName === "TH" && el.scrollWidth > el.clientWidth + 1) {
			out.push(name(el) + " is clipped in its cell");
		}
	}
	return out;
})`

// fits opens path at width and fails the test for whatever is cut off
// (cutOff) and for every Content-Security-Policy violation. It saves a
// screenshot of the page to screenshots/fit-<width>-<path>.png.
func (j *journey) fits(t *testing.T, tab context.Context, width int64, path string) {
	t.Helper()
	j.emulate(t, tab, width)
	// The page records its Content-Security-Policy violations from its start.
	script, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.cspViolations = [];
			document.addEventListener("securitypolicyviolation", e =>
				window.cspViolations.push(e.violatedDirective + " " + (e.sourceFile || e.blockedURI) + ":" + e.lineNumber + " " + e.sample));`,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer chromedp.Call(tab, page.RemoveScriptToEvaluateOnNewDocument, page.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: script.Identifier})
	j.do(t, tab, "open "+path, chromedp.Navigate(j.url+path), chromedp.WaitReady(chromedp.CSS("main")),
		chromedp.Sleep(200*time.Millisecond)) // live sections swap in their first figures
	problems, err := chromedp.Run(tab, chromedp.Evaluate[[]string](fmt.Sprintf("%s(%d).concat(window.cspViolations || [\"no CSP listener\"])", cutOff, width)))
	if err != nil {
		t.Fatalf("measure %s: %v", path, err)
	}
	seen := map[string]bool{}
	for _, p := range problems {
		if !seen[p] {
			seen[p] = true
			t.Errorf("at %dpx on %s: %s", width, path, p)
		}
	}
	name := fmt.Sprintf("fit-%d-%s", width, strings.NewReplacer("/", "-", "?", "-", "=", "-").Replace(strings.Trim(path, "/")))
	if len(problems) > 0 {
		name = "failed-" + name
	}
	j.shot(t, tab, name)
}

// approvable fails the test unless the dashboard's Approve and Decline, one
// at a time scrolled to, are wholly in the window and take a tap.
func (j *journey) approvable(t *testing.T, tab context.Context, width int64) {
	t.Helper()
	j.emulate(t, tab, width)
	j.do(t, tab, "open the dashboard", chromedp.Navigate(j.url+"/console/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="budget-request"]`)))
	for _, action := range []string{"approve", "decline"} {
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
			const b = document.querySelector('[data-testid="budget-request"] form[action$="/`+action+`"] button');
			if (!b) return "missing";
			b.scrollIntoView({block: "center", inline: "nearest"});
			const r = b.getBoundingClientRect();
			if (r.left < 0 || r.top < 0 || r.right > `+fmt.Sprint(width)+` || r.bottom > innerHeight) {
				return "at " + [r.left, r.top, r.right, r.bottom].map(Math.round) + " in a window " + innerHeight + "px high";
			}
			const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
			return hit && b.contains(hit) ? "" : "covered by " + (hit ? hit.outerHTML.slice(0, 60) : "nothing");
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if got != "" {
			t.Errorf("at %dpx the dashboard's %s button is not reachable: %s", width, action, got)
			j.shot(t, tab, fmt.Sprintf("failed-%s-%d", action, width))
		}
	}
}

// navClickable fails the test unless every link of the header's nav is
// wholly in the window and a click on it opens its page.
func (j *journey) navClickable(t *testing.T, tab context.Context, width int64) {
	t.Helper()
	j.emulate(t, tab, width)
	j.do(t, tab, "open the dashboard", chromedp.Navigate(j.url+"/console/dashboard"), chromedp.WaitReady(chromedp.CSS("main")))
	links, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("header nav a")].map(a => a.getAttribute("href"))`))
	if err != nil || len(links) < 7 {
		t.Fatalf("the owner's nav links: %v (%v)", links, err)
	}
	for _, href := range links {
		sel := fmt.Sprintf(`header nav a[href=%q]`, href)
		j.do(t, tab, "open the dashboard", chromedp.Navigate(j.url+"/console/dashboard"), chromedp.WaitReady(chromedp.CSS("main")))
		where, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
			const a = document.querySelector('`+sel+`');
			const r = a.getBoundingClientRect();
			if (r.width === 0 || r.left < 0 || r.top < 0 || r.right > `+fmt.Sprint(width)+` || r.bottom > innerHeight) {
				return "at " + [r.left, r.top, r.right, r.bottom].map(Math.round);
			}
			return "";
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if where != "" {
			t.Errorf("at %dpx the nav link %s is not wholly on screen: %s", width, href, where)
			continue
		}
		// A real click at the link's middle, where a tap would land.
		j.do(t, tab, "click a nav link", chromedp.Click(chromedp.CSS(sel)))
		var at string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if at, err = chromedp.Run(tab, chromedp.Location()); err == nil && strings.TrimPrefix(at, j.url) == href {
				break
			}
		}
		if strings.TrimPrefix(at, j.url) != href {
			t.Errorf("at %dpx a click on the nav link %s went to %s (%v)", width, href, at, err)
		}
	}
}
