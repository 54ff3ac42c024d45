package views_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"github.com/tollgate/tollgate/views"
)

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

var nav = views.Nav{Email: "owner@acme.test", Team: "acme", Owner: true, Active: views.TabMembers}

// pages is every full page with a representative view model.
func pages() map[string]templ.Component {
	keys := views.Keys{Own: true, CreateURL: "/console/keys",
		Rows: []views.KeyRow{{ID: "abcdefghijklm", Name: "laptop", State: "active", RotateURL: "/r", RevokeURL: "/v"}},
		New:  &views.NewKey{ID: "abcdefghijklm", Plaintext: "tg_x_y"}}
	row := views.MemberRow{ID: 2, Email: "ada@acme.test", Role: "member", Status: "active", URL: "/m/2", StatusURL: "/m/2/status"}
	form := views.RouteForm{Action: "/console/routes", Add: true, Preset: "anthropic"}
	usageVM := views.Usage{Own: true, StreamURL: "/console/usage/live", Connected: true, Budget: views.Budget{Spent: "$1.00", Limit: "$2.00"},
		Limits: []views.LimitLine{{Name: "Budget", Value: "$2.00 per day"}},
		Recent: []views.RecentRequest{{Model: "claude", Status: "200 settled"}}}
	return map[string]templ.Component{
		"signin": views.SignInPage(views.SignIn{Error: "Wrong email or password."}),
		"setup":  views.SetupPage(views.Setup{Action: "/console/setup/t"}),
		"accept": views.InviteAcceptPage(views.InviteAccept{Action: "/console/invite/t", Team: "acme", Email: "ada@acme.test"}),
		"accept-sso-only": views.InviteAcceptPage(views.InviteAccept{Action: "/console/invite/t", Team: "acme", Email: "ada@acme.test", PasswordOff: true,
			Methods: []views.SignInMethod{{Label: "Continue with Acme ID", URL: "/console/invite/t/signin/oidc"}}}),
		"gone":       views.LinkGonePage(),
		"setup-done": views.SetupDonePage(),
		"error":      views.ErrorPage("Not found", "Nothing here."),
		"home":       views.HomePage(views.Home{Nav: nav, Keys: keys, Checklist: &views.Checklist{Steps: []views.ChecklistStep{{Label: "Add a route", URL: "/console/routes", Done: true}, {Label: "Invite someone", URL: "/console/members"}}}, Snippets: views.Snippets("https://gw.example", []views.SnippetRoute{{Prefix: "/anthropic", Dialect: "anthropic"}})}),
		"members":    views.MembersPage(views.Members{Nav: nav, Rows: []views.MemberRow{row}, Invite: views.Invite{Link: "https://gw/console/invite/t"}}),
		"member":     views.MemberPage(views.Member{Nav: nav, Row: row, Keys: views.Keys{}}),
		"routes":     views.RoutesPage(views.Routes{Nav: nav, Rows: []views.RouteRow{{Prefix: "/anthropic", Header: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"}}, Form: form}),
		"route":      views.RouteEditPage(views.RouteEdit{Nav: nav, Form: views.RouteForm{Action: "/console/routes/1"}}),
		"audit": views.AuditPage(views.Audit{Nav: nav, Rows: []views.AuditRow{{At: "2026-01-02 03:04:05", Sentence: "owner@acme.test cut off ada@acme.test."}},
			Members: []views.Option{{Value: "2", Label: "ada@acme.test"}}, Actions: []views.Option{{Value: "member.status", Label: "Cut off or restored"}}, Older: "/console/audit?before=3"}),
		"confirm": views.ConfirmPage(views.Confirm{Nav: nav, Title: "Sure?", Action: "/x", Fields: map[string]string{"status": "disabled"}}),
		"dashboard": views.DashboardPage(views.Dashboard{Nav: nav, StreamURL: "/console/dashboard/live", Live: views.DashboardLive{
			Connected: true, Rows: []views.DashboardRow{{ID: 2, Email: "ada@acme.test", Spend: views.Budget{Spent: "$1.00", Limit: "$4.00", Percent: 25}}},
			Chart: views.NewChart([]views.ChartMinute{{SpendMicros: 5}, {Refused: 2}}, func(int64) string { return "0.01" })}}),
		"member-usage": views.MemberPage(views.Member{Nav: nav, Row: row, Usage: usageVM, Limits: views.LimitsForm{Action: "/l", Subject: "ada"}}),
		"home-usage":   views.HomePage(views.Home{Nav: nav, Keys: keys, Usage: &usageVM}),
		"team-limits":  views.TeamLimitsPage(views.TeamLimits{Nav: nav, Form: views.LimitsForm{Team: true, Action: "/t"}}),
		"prices": views.PricesPage(views.Prices{Nav: nav, Rows: []views.PriceRow{{Model: "m", Tier: "above"}},
			Form: views.PriceForm{Action: "/console/prices"}}),
		"price": views.PriceEditPage(views.PriceEdit{Nav: nav, Form: views.PriceForm{Action: "/console/prices", Edit: true, Model: "m"}}),
	}
}

// TestPagesAreAccessibleAndSelfContained checks every page: every form control
// has a label, nothing inline that the Content-Security-Policy would block,
// nothing loaded from another origin.
func TestPagesAreAccessibleAndSelfContained(t *testing.T) {
	t.Parallel()
	for name, page := range pages() {
		doc := render(t, page)
		if doc.Find("html[lang] meta[name=viewport]").Length() != 1 || doc.Find("h1").Length() != 1 {
			t.Errorf("%s: want lang, a viewport and one h1", name)
		}
		doc.Find("input, select").Each(func(_ int, s *goquery.Selection) {
			id, _ := s.Attr("id")
			if s.AttrOr("type", "") == "hidden" {
				return
			}
			if _, aria := s.Attr("aria-label"); !aria && (id == "" || doc.Find(`label[for="`+id+`"]`).Length() != 1) {
				t.Errorf("%s: control %q has no label", name, s.AttrOr("name", id))
			}
		})
		doc.Find("script").Each(func(_ int, s *goquery.Selection) {
			if src := s.AttrOr("src", ""); !strings.HasPrefix(src, "/static/") {
				t.Errorf("%s: inline or external script %q", name, src)
			}
		})
		doc.Find("link[href], img[src]").Each(func(_ int, s *goquery.Selection) {
			if u := s.AttrOr("href", s.AttrOr("src", "")); !strings.HasPrefix(u, "/static/") {
				t.Errorf("%s: external resource %q", name, u)
			}
		})
		if doc.Find("[style], style, [onclick], [onsubmit]").Length() > 0 {
			t.Errorf("%s: inline style or handler", name)
		}
	}
}

func TestSnippetsCallThisGateway(t *testing.T) {
	t.Parallel()
	snippets := views.Snippets("https://gw.example/", []views.SnippetRoute{
		{Prefix: "/anthropic", Dialect: "anthropic"}, {Prefix: "/openai", Dialect: "openai"}, {Prefix: "/team/local", Dialect: "generic"}})
	var titles []string
	for _, s := range snippets {
		titles = append(titles, s.Title)
		if strings.Contains(s.Code, "tg_") || !strings.Contains(s.Code, "TOLLGATE_KEY") {
			t.Errorf("%s: the key must come from $TOLLGATE_KEY:\n%s", s.Title, s.Code)
		}
	}
	want := []string{"Anthropic SDK, Python (/anthropic)", "Anthropic SDK, TypeScript (/anthropic)", "curl (/anthropic)",
		"OpenAI SDK, Python (/openai)", "OpenAI SDK, TypeScript (/openai)", "curl (/openai)", "curl (/team/local)"}
	if strings.Join(titles, "|") != strings.Join(want, "|") {
		t.Fatalf("snippets = %q, want %q", titles, want)
	}
	for i, url := range []string{`base_url="https://gw.example/anthropic"`, `baseURL: "https://gw.example/anthropic"`,
		"curl https://gw.example/anthropic/v1/messages", `base_url="https://gw.example/openai/v1"`,
		`baseURL: "https://gw.example/openai/v1"`, "curl https://gw.example/openai/v1/chat/completions", "curl https://gw.example/team/local/"} {
		if !strings.Contains(snippets[i].Code, url) {
			t.Errorf("%s lacks %s:\n%s", snippets[i].Title, url, snippets[i].Code)
		}
	}
	home := render(t, views.HomePage(views.Home{Nav: nav, Snippets: snippets}))
	if got := home.Find(`[data-testid="snippet"] code`).Length(); got != len(snippets) {
		t.Errorf("home page shows %d snippets, want %d", got, len(snippets))
	}
	if home.Find(`button[data-copy][hidden]`).Length() != len(snippets) {
		t.Error("copy buttons must start hidden (they need JavaScript)")
	}
}

func TestOwnersSeeOwnerTabs(t *testing.T) {
	t.Parallel()
	for owner, want := range map[bool]int{true: 7, false: 1} {
		n := views.Nav{Email: "x@acme.test", Team: "acme", Owner: owner, Active: views.TabKeys}
		doc := render(t, views.HomePage(views.Home{Nav: n}))
		if got := doc.Find(`nav a`).Length(); got != want {
			t.Errorf("owner %v: %d tabs, want %d", owner, got, want)
		}
		if doc.Find(`nav a[aria-current="page"]`).Text() != "Your keys" {
			t.Errorf("owner %v: the current tab is not marked", owner)
		}
	}
}

func TestBudgetBarAndChart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spent, limit int64
		percent      int
		over         bool
	}{{0, 100, 0, false}, {1, 1000, 1, false}, {50, 100, 50, false}, {99, 100, 99, false}, {100, 100, 100, true},
		{150, 100, 100, true}, {0, 0, 100, true}} {
		if p, over := views.BudgetBar(c.spent, c.limit); p != c.percent || over != c.over {
			t.Errorf("BudgetBar(%d, %d) = %d, %v; want %d, %v", c.spent, c.limit, p, over, c.percent, c.over)
		}
	}
	minutes := make([]views.ChartMinute, 60)
	minutes[10].SpendMicros, minutes[59].SpendMicros, minutes[30].Refused = 100, 50, 4
	c := views.NewChart(minutes, func(n int64) string { return itoa(n) })
	if len(c.Bars) != 2 || c.Bars[0].H != 120 || c.Bars[1].H != 60 || c.MaxSpend != "$100" || c.MaxRefused != "4" {
		t.Errorf("chart: %+v", c)
	}
	if got := len(strings.Fields(c.Line)); got != 60 {
		t.Errorf("429 line has %d points, want 60", got)
	}
	doc := render(t, views.DashboardLiveView(views.DashboardLive{Chart: c}))
	if doc.Find(`svg[role="img"] rect.spend title`).Length() != 2 || doc.Find(`polyline.throttled`).Length() != 1 {
		t.Error("the chart's SVG lacks its bars or line")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
