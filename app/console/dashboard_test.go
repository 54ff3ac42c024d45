package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/limiter/redistest"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// withLive gives the console live counters and fast streams.
func withLive(s *live.Stats) option {
	return func(o *console.Options) {
		o.Live, o.StreamInterval = s, 100*time.Millisecond
	}
}

// call reports one request of member to s, as the gateway's observer hook does.
func call(s *live.Stats, team, member int64, status int, cost int64) {
	admitted := status < 400
	if admitted {
		s.Started(team, member)
	}
	o := proxy.Outcome{TeamID: team, MemberID: member, Admitted: admitted, Status: status, CostMicros: cost}
	if admitted {
		o.Usage = usage.Usage{InputTokens: 10, OutputTokens: 5}
	}
	s.Finished(o)
}

// texts is the trimmed text of each element of sel, joined by spaces.
func texts(sel *goquery.Selection) string {
	var out []string
	sel.Each(func(_ int, s *goquery.Selection) { out = append(out, strings.TrimSpace(s.Text())) })
	return strings.Join(out, " ")
}

// row finds the dashboard row of email in an HTML fragment.
func row(t *testing.T, html, email string) *goquery.Selection {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader("<table>" + html + "</table>"))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Find(`[data-testid="dashboard-row"][data-email="` + email + `"]`)
}

func cell(r *goquery.Selection, id string) string {
	return strings.TrimSpace(r.Find(`[data-testid="` + id + `"]`).Text())
}

// TestDashboardStreamAcrossReplicas: traffic counted by one gateway replica
// reaches an owner's dashboard, served by another replica, within 2 seconds,
// over the event stream; the stream ends when the client leaves.
func TestDashboardStreamAcrossReplicas(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	gateway := live.New(redistest.Client(t), live.Options{Prefix: prefix, Interval: 200 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go gateway.Run(ctx)
	reader := live.New(redistest.Client(t), live.Options{Prefix: prefix})
	e := newEnv(t, withLive(reader))
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")

	s := owner.openStream("/console/dashboard/live")
	if s.resp.StatusCode != http.StatusOK || s.resp.Header.Get("Content-Type") != "text/event-stream" ||
		s.resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("stream: %d %q %q", s.resp.StatusCode, s.resp.Header.Get("Content-Type"), s.resp.Header.Get("Cache-Control"))
	}
	first, err := s.next(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.name != "dashboard" || !strings.HasPrefix(first.data, `<div id="dashboard-live" sse-swap="dashboard"`) {
		t.Fatalf("first event %q:\n%.300s", first.name, first.data)
	}
	if r := row(t, first.data, "ada@acme.test"); cell(r, "live-requests") != "0" || cell(r, "live-status") != "Active" {
		t.Fatalf("ada before any traffic: requests %q, status %q", cell(r, "live-requests"), cell(r, "live-status"))
	}

	sent := time.Now()
	call(gateway, o.TeamID, ada.ID, 200, 1234)
	// Refused after its whole wait in the fair waiting room.
	gateway.Finished(proxy.Outcome{TeamID: o.TeamID, MemberID: ada.ID, Status: 429, Refusal: "queued", Queued: 3 * time.Second})
	for {
		ev, err := s.next(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := row(t, ev.data, "ada@acme.test")
		if cell(r, "live-requests") == "2" {
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("traffic reached the dashboard after %v, want within 2s", took)
			}
			if cell(r, "live-429") != "1" || cell(r, "live-tokens") != "15" || cell(r, "live-status") != "Throttled" {
				t.Errorf("ada's row: 429s %q, tokens %q, status %q", cell(r, "live-429"), cell(r, "live-tokens"), cell(r, "live-status"))
			}
			if got := cell(r, "live-waited"); got != "1 · 3000 ms" {
				t.Errorf("ada's row: waited %q, want 1 request that waited 3000 ms", got)
			}
			if !strings.Contains(ev.data, `data-testid="team-waited">1 · 3000 ms<`) {
				t.Errorf("the team's figures do not say one request waited 3000 ms:\n%.2000s", ev.data)
			}
			break
		}
		if time.Since(sent) > 5*time.Second {
			t.Fatal("the dashboard never showed ada's requests")
		}
	}

	// The client leaves: the server's stream ends.
	s.close()
	deadline := time.Now().Add(5 * time.Second)
	for e.console.OpenStreams() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the event stream outlived its client")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLive(live.New(nil, live.Options{})), func(o *console.Options) { o.StreamLifetime = 300 * time.Millisecond })
	owner, _ := e.owner("acme", "owner@acme.test")

	// After its lifetime, so the browser reconnects through the session check.
	// Its last event says so, and console.js reconnects without an error.
	s := owner.openStream("/console/dashboard/live")
	start := time.Now()
	var last event
	for {
		ev, err := s.next(5 * time.Second)
		if err != nil {
			break
		}
		last = ev
		if time.Since(start) > 5*time.Second {
			t.Fatal("the stream outlived StreamLifetime")
		}
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Errorf("the stream ended after %v, before its lifetime", time.Since(start))
	}
	if last.name != "end" {
		t.Errorf("the stream's last event is %q, want end", last.name)
	}

	// At shutdown.
	e2 := newEnv(t, withLive(live.New(nil, live.Options{})))
	owner2, _ := e2.owner("acme", "owner@acme.test")
	s = owner2.openStream("/console/usage/live")
	if _, err := s.next(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	e2.console.CloseStreams()
	for {
		_, err := s.next(5 * time.Second)
		if err != nil && !strings.Contains(err.Error(), "no event") {
			break
		}
		if err != nil {
			t.Fatal("CloseStreams left a stream open")
		}
	}
}

func TestDashboardAccess(t *testing.T) {
	t.Parallel()
	stats := live.New(nil, live.Options{})
	e := newEnv(t, withLive(stats))
	owner, o := e.owner("acme", "owner@acme.test")
	ada, a := e.invite(owner, "ada@acme.test")
	_, b := e.invite(owner, "bob@acme.test")
	call(stats, o.TeamID, a.ID, 200, 2_500_000)
	call(stats, o.TeamID, b.ID, 402, 0)

	page := owner.get("/console/dashboard")
	wantStatus(t, "dashboard", page, http.StatusOK)
	if page.doc.Find(`[data-testid="dashboard-row"]`).Length() != 3 || page.doc.Find(`[hx-ext="sse"][sse-connect="/console/dashboard/live"]`).Length() != 1 {
		t.Errorf("dashboard: %d rows, stream attribute %v", page.doc.Find(`[data-testid="dashboard-row"]`).Length(),
			page.has("dashboard"))
	}
	bob := page.doc.Find(`[data-testid="dashboard-row"][data-email="bob@acme.test"]`)
	if cell(bob, "live-402") != "1" || page.text("team-requests") != "2" || page.doc.Find(`[data-testid="chart"] rect.spend`).Length() != 1 {
		t.Errorf("bob's 402s %q, team requests %q, chart bars %d", cell(bob, "live-402"), page.text("team-requests"),
			page.doc.Find(`[data-testid="chart"] rect.spend`).Length())
	}
	if page.doc.Find(`nav a[aria-current="page"]`).Text() != "Dashboard" {
		t.Error("the Dashboard tab is not current")
	}

	// A member gets 403 for the page and the stream; their own usage stream
	// carries their figures only.
	if r := ada.get("/console/dashboard"); r.status != http.StatusForbidden {
		t.Errorf("member on the dashboard: %d", r.status)
	}
	if s := ada.openStream("/console/dashboard/live"); s.resp.StatusCode != http.StatusForbidden {
		t.Errorf("member on the dashboard stream: %d", s.resp.StatusCode)
	}
	ev := ada.firstEvent("/console/usage/live")
	if ev.name != "usage" || !strings.Contains(ev.data, `id="usage"`) {
		t.Fatalf("member's usage event %q:\n%.300s", ev.name, ev.data)
	}
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(ev.data))
	if got := strings.TrimSpace(doc.Find(`[data-testid="usage-requests"]`).Text()); got != "1" {
		t.Errorf("ada's own requests = %q, want 1", got)
	}
	if strings.Contains(ev.data, "bob@acme.test") || strings.Contains(ev.data, "owner@acme.test") {
		t.Error("a member's usage stream names other members")
	}
	if r := e.client().do("GET", "/console/usage/live", nil, map[string]string{"Accept": "text/event-stream"}); r.status != http.StatusOK ||
		r.body != "event: signedout\ndata: /console/signin\n\n" {
		t.Errorf("usage stream without a session: %d %q, want only the signedout event", r.status, r.body)
	}
}
