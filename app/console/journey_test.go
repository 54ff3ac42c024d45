package console_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/limiter/redistest"
)

const chromium = "/usr/bin/chromium"

// TestBrowserJourney clicks through the console in headless Chromium, as the
// team would: setup link → owner creates the team and a route → invites a
// member → the member joins and creates a key → the owner opens the dashboard →
// that key calls the gateway through the Anthropic SDK → the dashboard shows
// the request without a reload (pushed over SSE from the gateway replica's
// counters in Redis) → the owner sets the member's limits and budget → the
// member's page shows their usage → the owner cuts the member off → the
// member's next call is refused and their page says so; they sign out and in.
// Screenshots of each screen go to screenshots/ at the module root; with
// SCREENSHOT_DIR set (make screenshots), the README's dashboard.png and
// member.png go there too.
func TestBrowserJourney(t *testing.T) {
	t.Parallel()
	needChromium(t)
	j := startJourney(t)

	// The operator prints a setup link; the owner opens it.
	token, _, err := j.st.CreateSetupLink(t.Context(), store.ActorCLI)
	if err != nil {
		t.Fatal(err)
	}
	owner := j.tab(t)
	j.do(t, owner, "open the setup link", chromedp.Navigate(console.SetupURL(j.url, token)))
	j.shot(t, owner, "01-setup")
	j.do(t, owner, "create the team",
		chromedp.SendKeys(chromedp.ID("team"), "acme"),
		chromedp.SendKeys(chromedp.ID("email"), "owner@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="keys"]`)))
	j.shot(t, owner, "02-owner-home")

	// The owner adds the Anthropic route (pointed at the mock provider).
	j.do(t, owner, "add a route",
		chromedp.Navigate(j.url+"/console/routes"),
		chromedp.SendKeys(chromedp.ID("upstream"), j.mockURL),
		chromedp.Submit(chromedp.ID("upstream")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="route-row"]`)))
	if state := j.text(t, owner, `[data-testid="credential-state"]`); state != "set" {
		t.Errorf("route credential shows %q, want set", state)
	}
	j.shot(t, owner, "03-routes")

	// The owner invites a member.
	j.do(t, owner, "invite a member",
		chromedp.Navigate(j.url+"/console/members"),
		chromedp.SendKeys(chromedp.ID("invite-email"), "ada@acme.test"),
		chromedp.Submit(chromedp.ID("invite-email")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="invite-link"]`)))
	link := j.text(t, owner, `[data-testid="invite-link"]`)
	j.shot(t, owner, "04-invite")

	// The member accepts in their own browser profile and creates a key.
	member := j.tab(t)
	j.do(t, member, "open the invite", chromedp.Navigate(link))
	j.shot(t, member, "05-accept-invite")
	j.do(t, member, "accept the invite",
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="create-key"]`)))
	j.do(t, member, "create a key",
		chromedp.SendKeys(chromedp.ID("key-name"), "laptop"),
		chromedp.Click(chromedp.CSS(`[data-testid="create-key"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="new-key-value"]`)))
	key := j.text(t, member, `[data-testid="new-key-value"]`)
	j.shot(t, member, "06-member-new-key")
	j.phoneShot(t, member, "06-member-new-key-phone")

	// The owner watches the dashboard, open before any traffic.
	ada := `tr[data-email="ada@acme.test"] `
	j.do(t, owner, "open the dashboard",
		chromedp.Navigate(j.url+"/console/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(ada+`[data-testid="live-requests"]`)),
		// Gone if the page reloads: the figures must arrive without one.
		chromedp.Evaluate[chromedp.Void](`window.tollgateNoReload = true`))
	if got := j.text(t, owner, ada+`[data-testid="live-requests"]`); got != "0" {
		t.Errorf("ada's requests before any call: %q, want 0", got)
	}

	// The key works through the gateway, with the official SDK.
	client := anthropic.NewClient(anthropicoption.WithBaseURL(j.url+"/anthropic"), anthropicoption.WithAPIKey(key),
		anthropicoption.WithMaxRetries(0))
	call := func() error {
		_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
		return err
	}
	eventually(t, "the new key works through the gateway", func() bool { return call() == nil })
	called := time.Now()

	// The dashboard shows it, pushed over SSE, within 2 seconds.
	j.do(t, owner, "see the request on the dashboard (counted by the gateway replica through app/live, wired in app.New)",
		chromedp.Poll[chromedp.Void](`(() => {
			const row = document.querySelector('tr[data-email="ada@acme.test"]');
			return row && Number(row.querySelector('[data-testid="live-requests"]').textContent) >= 1 &&
				Number(row.querySelector('[data-testid="live-tokens"]').textContent) > 0;
		})()`, chromedp.WithPollingTimeout(10*time.Second)))
	if took := time.Since(called); took > 2*time.Second {
		t.Errorf("the request reached the dashboard after %v, want within 2s", took)
	}
	if reloaded, err := chromedp.Run(owner, chromedp.Evaluate[bool](`window.tollgateNoReload !== true`)); err != nil || reloaded {
		t.Errorf("the dashboard reloaded to show the request (%v)", err)
	}
	j.shot(t, owner, "07-dashboard-live")

	// The gateway goes away: within a few seconds the dashboard says its
	// figures are not live, and it recovers by itself when the gateway is back.
	j.setDown(true)
	j.srv.CloseClientConnections()
	cut := time.Now()
	j.do(t, owner, "see the dashboard say it is reconnecting",
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid="live-state"]').textContent.includes('Reconnecting') &&
			document.querySelector('[data-testid="updated"]').textContent.includes('Not live') &&
			document.querySelector('[data-testid="dashboard"]').classList.contains('stale')`,
			chromedp.WithPollingTimeout(10*time.Second)))
	if took := time.Since(cut); took > 6*time.Second {
		t.Errorf("the dashboard said it was not live after %v, want within a few seconds", took)
	}
	j.shot(t, owner, "07b-dashboard-reconnecting")
	j.setDown(false)
	j.do(t, owner, "see the dashboard live again",
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid="live-state"]').textContent === '' &&
			document.querySelector('[data-testid="updated"]').textContent.includes('Live · updated') &&
			!document.querySelector('[data-testid="dashboard"]').classList.contains('stale')`,
			chromedp.WithPollingTimeout(15*time.Second)))
	if reloaded, err := chromedp.Run(owner, chromedp.Evaluate[bool](`window.tollgateNoReload !== true`)); err != nil || reloaded {
		t.Errorf("the dashboard reloaded to recover (%v)", err)
	}

	// The owner sets ada's limits: 4 requests a minute, a daily budget.
	// The live dashboard swaps ada's row as updates arrive, so the link is
	// followed in the page (a click through a node id can find it replaced).
	j.do(t, owner, "set the member's limits",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+ada+`a').click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-form"]`)),
		chromedp.SetValue(chromedp.ID("rate"), "4"),
		chromedp.SetValue(chromedp.ID("period"), "1m"),
		chromedp.SetValue(chromedp.ID("budget"), "0.05"),
		chromedp.SetValue(chromedp.ID("budget_period"), "daily"),
		chromedp.Click(chromedp.CSS(`[data-testid="save-limits"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-saved"]`)))
	j.shot(t, owner, "08-member-limits")

	// A burst past the new rate: some calls are answered 429.
	var throttled int
	eventually(t, "the new rate limit answers 429", func() bool {
		var apiErr *anthropic.Error
		if err := call(); errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests {
			throttled++
		}
		return throttled >= 2
	})
	j.do(t, owner, "watch the dashboard",
		chromedp.Navigate(j.url+"/console/dashboard"),
		chromedp.Poll[chromedp.Void](`(() => {
			const row = document.querySelector('tr[data-email="ada@acme.test"]');
			return row && Number(row.querySelector('[data-testid="live-429"]').textContent) >= 2 &&
				Number(row.querySelector('[data-testid="spent"]').textContent.slice(1)) > 0 &&
				document.querySelectorAll('[data-testid="chart"] rect.spend').length > 0;
		})()`, chromedp.WithPollingTimeout(15*time.Second)))
	j.shot(t, owner, "09-dashboard-throttled")
	j.docShot(t, owner, "dashboard", 980)

	// The member's page shows their own usage, budget and requests.
	j.do(t, member, "see own usage",
		chromedp.Reload(),
		chromedp.Poll[chromedp.Void](`(() => {
			const n = document.querySelector('[data-testid="usage-429"]');
			return n && Number(n.textContent) >= 2 && document.querySelectorAll('[data-testid="recent-request"]').length > 0;
		})()`, chromedp.WithPollingTimeout(10*time.Second)))
	if got := j.text(t, member, `[data-testid="budget-remaining"]`); !strings.Contains(got, "left today") {
		t.Errorf("member's budget line: %q", got)
	}
	j.shot(t, member, "10-member-usage")
	j.docShot(t, member, "member", 900)

	// The owner cuts the member off; the gateway refuses the next call. The
	// member's page reconnects at the end of its stream through the session
	// check, which the cut-off fails: it shows the refusal live only if it
	// comes before that, so the page is opened afresh first, giving a
	// stream's lifetime for the refusal to be pushed (from a stream left
	// running, that was a race the journey lost about half the time).
	j.do(t, member, "reopen the member page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="usage-refused"]`)))
	j.do(t, owner, "cut the member off",
		chromedp.Navigate(j.url+"/console/members"),
		chromedp.Click(chromedp.CSS(`tr[data-email="ada@acme.test"] [data-testid="cut-off-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-email="ada@acme.test"] [data-testid="restore-button"]`)))
	j.shot(t, owner, "11-members-cut-off")
	eventually(t, "the cut-off member's call is refused with 403", func() bool {
		var apiErr *anthropic.Error
		return errors.As(call(), &apiErr) && apiErr.StatusCode == http.StatusForbidden
	})

	// The member's page, still open, goes to sign-in by itself once its live
	// stream next checks the session (the cut-off ended it, on every replica);
	// signed in again, it says they are cut off.
	j.do(t, member, "be signed out", chromedp.WaitVisible(chromedp.CSS(`[data-testid="signin"]`)),
		chromedp.SendKeys(chromedp.ID("email"), "ada@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="cut-off"]`)))
	if strings.Contains(j.html(t, member), key) {
		t.Error("the member page shows the key's plaintext again")
	}
	j.shot(t, member, "12-member-cut-off")
	j.phoneShot(t, member, "12-member-cut-off-phone")
	j.do(t, owner, "see the cut-off on the dashboard", chromedp.Navigate(j.url+"/console/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(ada+`[data-testid="live-status"]`)))
	if got := j.text(t, owner, ada+`[data-testid="live-status"]`); got != "Cut off" {
		t.Errorf("ada's status on the dashboard: %q, want Cut off", got)
	}
	j.phoneShot(t, owner, "13-dashboard-phone")

	// Signing out and in again goes through the sign-in form.
	j.do(t, member, "sign out",
		chromedp.Click(chromedp.CSS(`form[action="/console/signout"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signin"]`)))
	j.shot(t, member, "14-signin")
	j.do(t, member, "sign in",
		chromedp.SendKeys(chromedp.ID("email"), "ada@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="cut-off"]`)))

	j.do(t, owner, "open the audit log", chromedp.Navigate(j.url+"/console/audit"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit"]`)))
	j.shot(t, owner, "15-audit")
	j.do(t, owner, "open the prices", chromedp.Navigate(j.url+"/console/prices"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="price-row"]`)))
	j.shot(t, owner, "16-prices")
	j.do(t, owner, "open the team's limits", chromedp.Navigate(j.url+"/console/team/limits"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="limits-form"]`)))
	j.shot(t, owner, "17-team-limits")
	if html := j.html(t, owner); strings.Contains(html, providerSecret) || strings.Contains(html, key) {
		t.Error("the audit page shows a secret")
	}

	// No page is wider than a phone's screen or a laptop's.
	j.do(t, owner, "open the members", chromedp.Navigate(j.url+"/console/members"),
		chromedp.WaitVisible(chromedp.CSS(ada+`a`)))
	adaPage, err := chromedp.Run(owner, chromedp.Evaluate[string](`document.querySelector('tr[data-email="ada@acme.test"] a').getAttribute("href")`))
	if err != nil {
		t.Fatal(err)
	}
	j.do(t, owner, "open the routes", chromedp.Navigate(j.url+"/console/routes"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="route-row"]`)))
	routePage, err := chromedp.Run(owner, chromedp.Evaluate[string](`document.querySelector('[data-testid="route-row"] a').getAttribute("href")`))
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int64{390, 1280} {
		for _, path := range []string{"/console/", "/console/dashboard", "/console/members", adaPage, "/console/routes", routePage,
			"/console/prices", "/console/team/limits", "/console/audit"} {
			j.fits(t, owner, width, path)
		}
		j.fits(t, member, width, "/console/")
	}

	// Without JavaScript: no dead Copy buttons, and a new key is shown once, on
	// a page that reloads without making another.
	nojs := j.tab(t)
	if _, err := chromedp.Call(nojs, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	j.do(t, nojs, "sign in without JavaScript",
		chromedp.Navigate(j.url+"/console/signin?next=%2Fconsole%2Froutes"),
		chromedp.SendKeys(chromedp.ID("email"), "owner@acme.test"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="route-row"]`)))
	j.do(t, nojs, "create a key without JavaScript",
		chromedp.Navigate(j.url+"/console/"),
		chromedp.SendKeys(chromedp.ID("key-name"), "nojs"),
		chromedp.Submit(chromedp.ID("key-name")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="new-key-value"]`)))
	j.shot(t, nojs, "18-new-key-without-js")
	if at, err := chromedp.Run(nojs, chromedp.Location()); err != nil || at != j.url+"/console/" {
		t.Errorf("after creating a key without JavaScript the address is %q (%v), want the page's own", at, err)
	}
	visible, err := chromedp.Run(nojs, chromedp.Evaluate[int](`[...document.querySelectorAll("button")].filter(b => b.offsetParent !== null && b.hasAttribute("data-copy")).length`))
	if err != nil || visible != 0 {
		t.Errorf("without JavaScript %d Copy buttons show (%v), want none", visible, err)
	}
	keys := len(j.keysOf(t, "owner@acme.test"))
	j.do(t, nojs, "reload without JavaScript", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="keys"]`)))
	if n := len(j.keysOf(t, "owner@acme.test")); n != keys || j.text(t, nojs, `[data-testid="new-key"]`) != "(missing)" {
		t.Errorf("reloading after creating a key: %d keys (was %d), new key shown %q", n, keys, j.text(t, nojs, `[data-testid="new-key"]`))
	}
}

// keysOf is the keys of the member with email.
func (j *journey) keysOf(t *testing.T, email string) []store.Key {
	t.Helper()
	teams, err := j.st.Teams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []store.Key
	for _, team := range teams {
		members, err := j.st.Members(t.Context(), team.ID)
		if err != nil {
			t.Fatal(err)
		}
		all, err := j.st.Keys(t.Context(), team.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			for _, k := range all {
				if m.Email == email && k.MemberID == m.ID {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// journey is one server with the console and the gateway on one router, as
// app.Routes mounts them, in front of a mock provider.
type journey struct {
	st      *store.Store
	srv     *httptest.Server
	down    atomic.Bool  // the server drops every connection, as if the gateway were gone
	back    atomic.Int64 // when down last ended, in Unix nanoseconds
	url     string
	mockURL string
	browser context.Context
	shots   string
	docs    string // SCREENSHOT_DIR: where the README's screenshots go; "" to skip them
}

// startJourney starts the journey's server; opts adjust its console.
func startJourney(t *testing.T, opts ...option) *journey {
	t.Helper()
	dbURL := dbtest.Schema(t)
	pool := dbtest.Pool(t, dbURL)
	upstream := httptest.NewServer(mock.New(mock.Options{AnthropicKey: providerSecret}))
	t.Cleanup(upstream.Close)
	// The replica keeps its config snapshot fresh (LISTEN/NOTIFY); its router
	// serves the gateway half of the journey's server.
	// It counts live traffic into Redis under the test's own prefix.
	prefix := redistest.Prefix(t)
	gw := apptest.Start(t, dbURL, map[string]string{"ANTHROPIC_API_KEY": providerSecret, "CONFIG_POLL_INTERVAL": "10m",
		"REDIS_URL": cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"), "REDIS_KEY_PREFIX": prefix})
	srv := httptest.NewUnstartedServer(nil)
	// The replica's own store mirrors revocations and cut-offs to its limiter,
	// as the console's writes will in app.New.
	j := &journey{st: gw.App.Store, srv: srv, url: "http://" + srv.Listener.Addr().String(), mockURL: upstream.URL}
	// This console is another replica: it reads the live figures from Redis.
	o := console.Options{Store: j.st, Pool: pool, PublicURL: j.url, Logger: slog.New(slog.DiscardHandler),
		Getenv: func(name string) string { return map[string]string{"ANTHROPIC_API_KEY": providerSecret}[name] },
		Live:   live.New(redistest.Client(t), live.Options{Prefix: prefix}),
		// Streams end by design every 4s here, so the journey's live checks run
		// across several reconnects (and none may log an error).
		StreamLifetime: 4 * time.Second}
	o.SSO.Outbound = gw.App.Outbound()
	for _, opt := range opts {
		opt(&o)
	}
	c := console.New(o)
	t.Cleanup(c.CloseStreams)
	r := chi.NewRouter()
	c.Mount(r)
	r.Handle("/*", gw.App.Routes())
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if j.down.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		r.ServeHTTP(w, req)
	})
	srv.Start()
	t.Cleanup(srv.Close)

	j.shots = filepath.Join(moduleRoot(t), "screenshots")
	if err := os.MkdirAll(j.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SCREENSHOT_DIR"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(moduleRoot(t), dir)
		}
		j.docs = dir
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	t.Cleanup(cancel)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	j.browser = browser
	return j
}

// downEcho is how long after the gateway is back an error the browser logs is
// still taken for one it met while the gateway was gone.
const downEcho = time.Second

// setDown has the server drop every connection, or serve again.
func (j *journey) setDown(down bool) {
	if !down {
		j.back.Store(time.Now().UnixNano())
	}
	j.down.Store(down)
}

// tab opens a tab in a fresh browser context: its own cookies, like another
// person's browser. It accepts every confirm() dialog, and fails the test at
// its end for every error the page logged (a failed request, such as a
// favicon the gateway refuses, or a console.error, such as htmx:sseError)
// while the gateway was up.
func (j *journey) tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(j.browser, chromedp.WithNewBrowserContext())
	var mu sync.Mutex
	var logged []string
	t.Cleanup(func() {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range logged {
			t.Errorf("the browser logged an error: %s", e)
		}
	})
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Listen(ctx, func(ev any) {
		var e string
		switch ev := ev.(type) {
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				e = ev.Entry.Text + " " + ev.Entry.URL
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				for _, a := range ev.Args {
					e += " " + a.Description + string(a.Value)
				}
			}
		}
		// While the test has the gateway gone, failed streams are what it asks for;
		// the browser may report one it dropped then a moment after it is back.
		if e != "" && !j.down.Load() && time.Since(time.Unix(0, j.back.Load())) > downEcho {
			mu.Lock()
			logged = append(logged, e)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func (j *journey) do(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		j.shot(t, tab, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text of the first element matching css, read in one step in
// the page: live sections are swapped every second, and a node looked up
// first could be gone by the time its text is asked for.
func (j *journey) text(t *testing.T, tab context.Context, css string) string {
	t.Helper()
	sel, _ := json.Marshal(css)
	s, err := chromedp.Run(tab, chromedp.Evaluate[string](`(document.querySelector(`+string(sel)+`) || {innerText: "(missing)"}).innerText`))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

func (j *journey) html(t *testing.T, tab context.Context) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// shot saves a full-page screenshot as name.png.
func (j *journey) shot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(j.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// docShot saves the README's screenshot name.png to SCREENSHOT_DIR, if set:
// the top height pixels of the page at 1000 pixels wide, small enough to commit.
func (j *journey) docShot(t *testing.T, tab context.Context, name string, height int64) {
	t.Helper()
	if j.docs == "" {
		return
	}
	j.do(t, tab, "emulate a small laptop", chromedp.EmulateViewport(1000, height), chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(j.docs, name+".png"), png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
	j.do(t, tab, "emulate a laptop", chromedp.EmulateViewport(1280, 900))
}

// phoneShot saves a screenshot at a phone's width, then restores the laptop's.
func (j *journey) phoneShot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	j.do(t, tab, "emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	j.shot(t, tab, name)
	j.do(t, tab, "emulate a laptop", chromedp.EmulateViewport(1280, 900))
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// eventually polls cond for up to 10s: config changes reach the gateway's
// snapshot through LISTEN/NOTIFY, a few milliseconds after the console's write.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
