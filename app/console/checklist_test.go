package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// steps is the checklist's steps on a page, as "done"/"to do" per label.
func steps(r response) map[string]bool {
	out := map[string]bool{}
	for _, s := range r.doc.Find(`[data-testid="checklist-step"]`).EachIter() {
		out[strings.TrimSpace(s.Find("a").Text())] = s.AttrOr("data-done", "") == "true"
	}
	return out
}

// TestNewTeamChecklistAndWorkingSnippets: a new team's owner sees its limits
// and three next steps, each a link, on their page (where setup lands) and on the dashboard,
// ticked as they are done and gone once all are; members never see them. A
// route whose credential the gateway lacks does not count, and snippets show
// a route that works first, marking the others as answering 503.
func TestNewTeamChecklistAndWorkingSnippets(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // ANTHROPIC_API_KEY is set here; OPENAI_API_KEY is not
	ctx := t.Context()
	owner, o := e.ownerWithDefaults("acme", "owner@acme.test")
	const routeStep, inviteStep, callStep = "Add a provider route with its credential", "Invite someone", "Make a first call"
	const limitsStep = "Check the limits new members get"
	for _, path := range []string{"/console/", "/console/dashboard"} {
		r := owner.get(path)
		wantStatus(t, path, r, http.StatusOK)
		if got := steps(r); len(got) != 4 || !got[limitsStep] || got[routeStep] || got[inviteStep] || got[callStep] {
			t.Errorf("%s on a new team: steps %v, want four, only the limits (set from the start) done", path, got)
		}
		for _, href := range []string{"/console/routes", "/console/members#invite", "/console/#use-title"} {
			if r.doc.Find(`[data-testid="checklist"] a[href="`+href+`"]`).Length() != 1 {
				t.Errorf("%s: the checklist has no link to %s", path, href)
			}
		}
	}

	ada, a := e.invite(owner, "ada@acme.test")
	if _, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: o.TeamID, Preset: "openai", Prefix: "/oai",
		UpstreamURL: "http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	r := owner.get("/console/dashboard")
	if got := steps(r); got[routeStep] || !got[inviteStep] || got[callStep] {
		t.Errorf("after an invite and a route without its credential: steps %v", got)
	}
	if hint := r.text("checklist"); !strings.Contains(hint, "/oai answers 503 until $OPENAI_API_KEY is set") {
		t.Errorf("the checklist does not say why the route does not count: %q", hint)
	}
	if home := ada.get("/console/"); home.has("checklist") {
		t.Error("a member sees the owner's checklist")
	}

	if _, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: o.TeamID, Preset: "anthropic",
		UpstreamURL: "http://127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	home := ada.get("/console/")
	titles := home.doc.Find(`[data-testid="snippet"] summary`)
	if first := titles.First().Text(); first != "Anthropic SDK, Python (/anthropic)" {
		t.Errorf("first snippet %q, want the route that works", first)
	}
	if open := home.doc.Find(`[data-testid="snippet"][open] summary`).Text(); open != "Anthropic SDK, Python (/anthropic)" {
		t.Errorf("open snippet %q, want the route that works", open)
	}
	if all := texts(titles); !strings.Contains(all, "OpenAI SDK, Python (/oai: answers 503 until the gateway has $OPENAI_API_KEY)") {
		t.Errorf("snippets do not mark the route without a credential: %q", all)
	}
	if got := steps(owner.get("/console/")); !got[routeStep] || got[callStep] {
		t.Errorf("after a working route: steps %v", got)
	}

	now := time.Now().UTC()
	if err := e.st.WriteLedger(ctx, []proxy.LedgerEntry{{TeamID: o.TeamID, MemberID: a.ID, KeyID: "k", RequestID: "r1",
		Model: "claude-haiku-4-5", Status: proxy.LedgerSettled, HTTPStatus: 200, CreatedAt: now, SettledAt: now}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/console/", "/console/dashboard"} {
		if r := owner.get(path); r.has("checklist") {
			t.Errorf("%s still shows the checklist when every step is done: %v", path, steps(r))
		}
	}
}
