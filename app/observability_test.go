package app_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// observed is a team whose members each trip one control, served by a replica
// with its admin listener and an in-memory span recorder. The mock provider's
// front records the traceparent each upstream call carried.
type observed struct {
	st                *store.Store
	team              store.Team
	ada, bob, cy, dan store.Member
	keys              map[string]string // member email → key plaintext
	revokedKey        string
	gw                *apptest.Observed

	mu           sync.Mutex
	traceparents []string
}

const plantedPassword = "PLANTED-password-horse-battery-41"

func newObserved(t *testing.T) *observed {
	t.Helper()
	ctx := t.Context()
	dbURL := dbtest.Schema(t)
	o := &observed{st: store.New(dbtest.Pool(t, dbURL)).WithOutbound(apptest.Outbound()).WithGrants(apptest.Grants(nil)), keys: map[string]string{}}
	m := mock.New(mock.Options{AnthropicKey: anthropicSecret, OpenAIKey: openaiSecret, OutputTokens: 100})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.traceparents = append(o.traceparents, r.Header.Get("traceparent"))
		o.mu.Unlock()
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)

	var err error
	o.team, err = o.st.CreateTeam(ctx, store.ActorCLI, "acme")
	must(t, err)
	for _, preset := range []string{"anthropic", "openai"} {
		_, err = o.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: o.team.ID, Preset: preset, UpstreamURL: upstream.URL})
		must(t, err)
	}
	member := func(email string) store.Member {
		mem, err := o.st.AddMember(ctx, store.ActorCLI, o.team.ID, email, store.RoleMember)
		must(t, err)
		k, err := o.st.IssueKey(ctx, store.ActorCLI, o.team.ID, mem.ID, "laptop")
		must(t, err)
		o.keys[email] = k.Plaintext
		return mem
	}
	// ada has a budget she never reaches (so each of her requests is settled); bob
	// one request a minute; cy a budget of $0; dan is cut off.
	o.ada, o.bob, o.cy, o.dan = member("ada@acme.test"), member("bob@acme.test"), member("cy@acme.test"), member("dan@acme.test")
	_, err = o.st.SetMemberLimits(ctx, store.ActorCLI, o.team.ID, o.ada.ID, store.Limits{RatePeriod: time.Second, Budget: dollarsPtr(1000_000_000), BudgetPeriod: "total"})
	must(t, err)
	_, err = o.st.SetMemberLimits(ctx, store.ActorCLI, o.team.ID, o.bob.ID,
		store.Limits{RateAlgorithm: "token_bucket", RateLimit: 1, RatePeriod: time.Minute, RateBurst: 1})
	must(t, err)
	_, err = o.st.SetMemberLimits(ctx, store.ActorCLI, o.team.ID, o.cy.ID, store.Limits{RateAlgorithm: "token_bucket", RatePeriod: time.Second, Budget: dollarsPtr(0), BudgetPeriod: "total"})
	must(t, err)
	_, err = o.st.SetMemberStatus(ctx, store.ActorCLI, o.team.ID, o.dan.ID, store.StatusDisabled)
	must(t, err)
	revoked, err := o.st.IssueKey(ctx, store.ActorCLI, o.team.ID, o.ada.ID, "old")
	must(t, err)
	_, err = o.st.RevokeKey(ctx, store.ActorCLI, o.team.ID, revoked.ID)
	must(t, err)
	o.revokedKey = revoked.Plaintext
	// An owner who signs in to the console with a password.
	token, _, err := o.st.CreateInvite(ctx, store.ActorCLI, o.team.ID, "owner@acme.test", store.RoleOwner)
	must(t, err)
	_, err = o.st.AcceptInvite(ctx, token, plantedPassword)
	must(t, err)

	o.gw = apptest.StartObserved(t, dbURL, map[string]string{
		"ANTHROPIC_API_KEY": anthropicSecret,
		"OPENAI_API_KEY":    openaiSecret,
		"REDIS_URL":         "redis://127.0.0.1:6379/0",
		"REDIS_KEY_PREFIX":  redistest.Prefix(t),
	})
	return o
}

// scrape reads /metrics into "name{labels}" → value, labels as Prometheus
// prints them (sorted by name).
func (o *observed) scrape(t *testing.T) (map[string]float64, string) {
	t.Helper()
	status, body := o.gw.Admin(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics = %d", status)
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series, body
}

// series names one series as Prometheus prints it.
func series(name string, labels ...string) string {
	var pairs []string
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, labels[i]+`="`+labels[i+1]+`"`)
	}
	sort.Strings(pairs)
	if len(pairs) == 0 {
		return name
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// capture keeps every response the test saw, for the leak search.
type capture struct {
	mu  sync.Mutex
	out strings.Builder
}

func (c *capture) do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed, cookies seen
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.WriteString(resp.Status + "\n")
	// Set-Cookie is where the session id belongs (once, at sign-in); anywhere
	// else in a response it would be a leak.
	resp.Header.WriteSubset(&c.out, map[string]bool{"Set-Cookie": true})
	c.out.Write(b)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestScriptedRunIsCountedLoggedAndLeaksNothing sends a known mix of admitted
// and refused requests and console sign-ins, then checks the counters on
// /metrics match it, that request paths, models and methods cannot add series,
// that security events were logged once per burst with a count, and that no
// planted secret reached a log line, a metric, a span or a response.
func TestScriptedRunIsCountedLoggedAndLeaksNothing(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	start := time.Now()
	gw := o.gw.URL
	var c capture
	ada, bob, cy, dan := o.keys["ada@acme.test"], o.keys["bob@acme.test"], o.keys["cy@acme.test"], o.keys["dan@acme.test"]
	adaID, _, _ := strings.Cut(strings.TrimPrefix(ada, "tg_"), "_")

	want := func(req *http.Request, status int) {
		t.Helper()
		if r := c.do(t, req); r.status != status {
			t.Fatalf("%s %s = %d %s, want %d", req.Method, req.URL.Path, r.status, r.body, status)
		}
	}
	openai := func(key, body string) *http.Request {
		req, err := http.NewRequest(http.MethodPost, gw+"/openai/v1/chat/completions", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		return req
	}
	for range 3 {
		want(anthropicRequest(t, gw, ada, messagesBody), http.StatusOK)
	}
	want(openai(ada, `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`), http.StatusOK)
	want(anthropicRequest(t, gw, bob, messagesBody), http.StatusOK)
	want(anthropicRequest(t, gw, bob, messagesBody), http.StatusTooManyRequests)
	want(anthropicRequest(t, gw, cy, messagesBody), http.StatusPaymentRequired)
	want(anthropicRequest(t, gw, dan, messagesBody), http.StatusForbidden)
	want(anthropicRequest(t, gw, o.revokedKey, messagesBody), http.StatusUnauthorized)
	invalidKeys := []string{
		"tg_" + strings.Repeat("a", 13) + "_" + strings.Repeat("b", 52), // unknown id
		"tg_" + strings.Repeat("c", 13) + "_" + strings.Repeat("d", 52), // unknown id
		"tg_" + adaID + "_" + strings.Repeat("e", 52),                   // ada's id, wrong secret
		"", // none
	}
	var bodies []string
	for _, k := range invalidKeys {
		r := c.do(t, anthropicRequest(t, gw, k, messagesBody))
		if r.status != http.StatusUnauthorized {
			t.Fatalf("key %q: %d, want 401", k, r.status)
		}
		bodies = append(bodies, r.body)
	}
	if len(slices.Compact(bodies)) != 1 {
		t.Errorf("invalid keys got different bodies (HOSTILE 8): %q", bodies)
	}
	want(anthropicRequest(t, gw+"/nowhere", ada, messagesBody), http.StatusNotFound)
	want(anthropicRequest(t, gw, ada, strings.Replace(messagesBody, "claude-sonnet-4-5", "no-such-model", 1)), http.StatusBadRequest)

	// Console: eleven wrong passwords lock eve's account out (the eleventh is
	// refused unchecked), then the owner signs in with the planted password.
	signIn := func(email, password string) response {
		req, err := http.NewRequest(http.MethodPost, gw+"/console/signin",
			strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
		must(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return c.do(t, req)
	}
	for range 11 {
		signIn("eve@acme.test", "wrong-"+plantedPassword)
	}
	r := signIn("owner@acme.test", plantedPassword)
	var sessionID string
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if strings.Contains(ck.Name, "tollgate") {
			sessionID = ck.Value
		}
	}
	if r.status != http.StatusSeeOther || sessionID == "" {
		t.Fatalf("owner sign-in = %d with cookies %v, want 303 and a session", r.status, r.header["Set-Cookie"])
	}

	t.Run("counters match the requests sent", func(t *testing.T) {
		got, _ := o.scrape(t)
		decisions := map[string]float64{}
		for k, v := range got {
			if strings.HasPrefix(k, "tollgate_admission_decisions_total{") {
				decisions[k] = v
			}
		}
		wantDecisions := map[string]float64{
			series("tollgate_admission_decisions_total", "outcome", "admitted", "reason", "none"):       5,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "rate"):        1,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "budget"):      1,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "cut_off"):     1,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "revoked"):     1,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "invalid_key"): 4,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "no_route"):    1,
			series("tollgate_admission_decisions_total", "outcome", "refused", "reason", "bad_body"):    1,
		}
		if !maps.Equal(decisions, wantDecisions) {
			t.Errorf("admission decisions =\n%v\nwant\n%v", decisions, wantDecisions)
		}
		id := func(m store.Member) string { return strconv.FormatInt(m.ID, 10) }
		req := func(member, route, method, class string, team ...string) string {
			tm := "acme"
			if len(team) > 0 {
				tm = team[0]
			}
			return series("tollgate_requests_total", "team", tm, "member", member, "route", route, "method", method, "code_class", class)
		}
		for name, n := range map[string]float64{
			req(id(o.ada), "/anthropic", "POST", "2xx"):                                                     3,
			req(id(o.ada), "/openai", "POST", "2xx"):                                                        1,
			req(id(o.ada), "/anthropic", "POST", "4xx"):                                                     1, // the unknown model
			req(id(o.ada), "none", "POST", "4xx"):                                                           2, // no route; the revoked key
			req(id(o.bob), "/anthropic", "POST", "2xx"):                                                     1,
			req(id(o.bob), "/anthropic", "POST", "4xx"):                                                     1,
			req(id(o.cy), "/anthropic", "POST", "4xx"):                                                      1,
			req(id(o.dan), "none", "POST", "4xx"):                                                           1,
			req("unknown", "none", "POST", "4xx", "unknown"):                                                4,
			"tollgate_in_flight":                                                                            0,
			series("tollgate_budget_remaining_micros", "team", "acme", "member", id(o.cy)):                  0,
			series("tollgate_security_events_total", "control", "api_key", "outcome", "refused_invalid"):    4,
			series("tollgate_security_events_total", "control", "api_key", "outcome", "refused_revoked"):    1,
			series("tollgate_security_events_total", "control", "member_cut_off", "outcome", "refused"):     1,
			series("tollgate_security_events_total", "control", "console_sign_in", "outcome", "failed"):     10,
			series("tollgate_security_events_total", "control", "console_sign_in", "outcome", "locked_out"): 1,
		} {
			if v, ok := got[name]; !ok || v != n {
				t.Errorf("%s = %v (present %v), want %v", name, v, ok, n)
			}
		}
		// bob and cy are held to their own limits: the limit working, not a security event.
		for _, control := range []string{"rate_limit", "budget"} {
			if name := series("tollgate_security_events_total", "control", control, "outcome", "refused"); got[name] != 0 {
				t.Errorf("%s = %v, want none", name, got[name])
			}
		}
		var total float64
		for k, v := range got {
			if strings.HasPrefix(k, "tollgate_requests_total{") {
				total += v
			}
		}
		if total != 15 {
			t.Errorf("tollgate_requests_total sums to %v, want the 15 gateway requests sent", total)
		}
		if got[series("tollgate_tokens_total", "team", "acme", "member", id(o.ada), "class", "output")] <= 0 ||
			got[series("tollgate_tokens_total", "team", "acme", "member", id(o.ada), "class", "input")] <= 0 {
			t.Error("no tokens counted for ada's answered requests")
		}
		// Spend equals what the ledger charged ada, to the micro-dollar.
		var ledgerCost int64
		eventually(t, 10*time.Second, "ada's four ledger rows settled", func() bool {
			rows, err := o.st.Ledger(t.Context(), o.team.ID, &o.ada.ID, time.Now().Add(-time.Hour), 100)
			must(t, err)
			ledgerCost = 0
			settled := 0
			for _, row := range rows {
				ledgerCost += row.CostMicros
				if row.Status != "held" {
					settled++
				}
			}
			return settled == 4
		})
		if spend := got[series("tollgate_spend_micros_total", "team", "acme", "member", id(o.ada))]; spend != float64(ledgerCost) || spend <= 0 {
			t.Errorf("tollgate_spend_micros_total for ada = %v, ledger says %d", spend, ledgerCost)
		}
		for _, name := range []string{"tollgate_config_reloads_total", "tollgate_snapshot_age_seconds", "tollgate_ledger_pending_rows",
			"tollgate_ledger_oldest_pending_seconds", "go_goroutines", "process_open_fds",
			series("tollgate_redis_fallback_decisions_total", "decision", "fail_closed"),
			series("tollgate_request_duration_seconds_count", "team", "acme", "route", "/anthropic"),
			series("tollgate_upstream_ttfb_seconds_count", "route", "/anthropic"),
			"tollgate_admission_duration_seconds_count"} {
			if _, ok := got[name]; !ok {
				t.Errorf("no %s on /metrics", name)
			}
		}
		// 7 requests reached admission; the team's first may take two calls
		// (the counters are rebuilt from the ledger in between).
		if n := got["tollgate_admission_duration_seconds_count"]; n < 7 || n > 8 {
			t.Errorf("admission timed %v times, want the 7 requests that reached it", n)
		}
	})

	t.Run("request data cannot add a series", func(t *testing.T) {
		// Warm up one of each shape, so every series they touch exists.
		odd := func(method, path, key, body string) *http.Request {
			req := anthropicRequest(t, gw+path, key, body)
			req.Method = method
			return req
		}
		shapes := func(tag string) {
			c.do(t, odd(http.MethodPost, "/"+tag, ada, messagesBody))                                                  // unknown path
			c.do(t, anthropicRequest(t, gw, ada, strings.Replace(messagesBody, "claude-sonnet-4-5", "model-"+tag, 1))) // unknown model
			c.do(t, odd("X"+strings.ToUpper(tag), "", ada, messagesBody))                                              // unknown method: the router refuses it
			c.do(t, odd(http.MethodTrace, "", ada, messagesBody))                                                      // a method counted as "other"
			c.do(t, anthropicRequest(t, gw, "tg_"+tag+"_"+tag, messagesBody))                                          // unknown key
			c.do(t, anthropicRequest(t, gw+"/anthropic/"+tag, ada, messagesBody))                                      // unknown path below a route
		}
		shapes(randomHex(4))
		before, _ := o.scrape(t)
		var tags []string
		for range 10 {
			tag := randomHex(6)
			tags = append(tags, tag)
			shapes(tag)
		}
		after, text := o.scrape(t)
		added := func(name string) bool { return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") }
		for name := range after {
			if _, ok := before[name]; !ok && !added(name) {
				t.Errorf("new series %s after requests with new paths, models, methods and keys", name)
			}
		}
		for _, tag := range tags {
			if strings.Contains(strings.ToLower(text), tag) {
				t.Errorf("request data %q appears on /metrics", tag)
			}
		}
	})

	t.Run("security events are logged once per burst", func(t *testing.T) {
		if err := o.gw.Shutdown(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		events := map[string][]map[string]any{}
		for line := range strings.SplitSeq(o.gw.Logs.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "security event" {
				continue
			}
			k := fmt.Sprint(rec["control"], "/", rec["outcome"])
			events[k] = append(events[k], rec)
		}
		// 4 invalid keys in the script, 11 more in the warm-up and the loop: the
		// first is logged at once, the rest in one summary per 10 s window.
		windows := int(time.Since(start)/(10*time.Second)) + 1
		for k, total := range map[string]float64{"api_key/refused_invalid": 15, "console_sign_in/failed": 10} {
			lines := events[k]
			var sum float64
			for i, l := range lines {
				sum += l["count"].(float64)
				if (i > 0) != (l["summary"] == true) {
					t.Errorf("%s line %d: %v; want the first plain, the rest summaries", k, i, l)
				}
			}
			if sum != total || len(lines) < 2 || len(lines) > 1+windows {
				t.Errorf("%s: %d lines counting %v: %v; want %v counted in at most %d lines", k, len(lines), sum, lines, total, 1+windows)
			}
		}
		for _, k := range []string{"api_key/refused_revoked", "member_cut_off/refused", "console_sign_in/locked_out"} {
			if len(events[k]) != 1 {
				t.Errorf("%s: %d lines, want 1", k, len(events[k]))
			}
		}
		first := events["member_cut_off/refused"]
		if len(first) == 1 && (first[0]["team"] != "acme" || first[0]["member"] != strconv.FormatInt(o.dan.ID, 10) ||
			first[0]["member_email"] != "dan@acme.test" || first[0]["request_id"] == nil || first[0]["trace_id"] == nil) {
			t.Errorf("cut-off event %v lacks team, member, email, request id or trace id", first[0])
		}
		if s := events["api_key/refused_invalid"]; len(s) == 2 && !strings.Contains(fmt.Sprint(s[1]["top_addresses"]), "127.0.0.1×") {
			t.Errorf("invalid-key summary %v does not name the address", s[1])
		}
		// One request line per gateway request, with the fields an operator reads.
		var requests int
		for line := range strings.SplitSeq(o.gw.Logs.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "request" {
				continue
			}
			requests++
			if rec["status"] == 200.0 {
				for _, f := range []string{"request_id", "trace_id", "team", "member", "route", "method", "duration_ms",
					"upstream_status", "ttfb_ms", "model", "tokens", "cost_micros"} {
					if _, ok := rec[f]; !ok {
						t.Errorf("request line %v has no %s", rec, f)
					}
				}
			}
		}
		if requests != 15+11*5 {
			t.Errorf("%d request lines, want %d", requests, 15+11*5)
		}
	})

	t.Run("no secret in any output", func(t *testing.T) {
		_, metricsText := o.scrapeAfterShutdown(t)
		spans := spanText(o.gw.Spans.Ended())
		if len(o.gw.Spans.Ended()) == 0 {
			t.Fatal("no spans recorded")
		}
		outputs := map[string]string{"logs": o.gw.Logs.String(), "metrics": metricsText, "spans": spans, "responses": c.out.String()}
		planted := map[string]string{"anthropic credential": anthropicSecret, "openai credential": openaiSecret,
			"password": plantedPassword, "session id": sessionID, "revoked key": o.revokedKey}
		for email, key := range o.keys {
			_, secret, _ := strings.Cut(strings.TrimPrefix(key, "tg_"), "_")
			planted["key secret of "+email] = secret
			planted["key of "+email] = key
		}
		for what, out := range outputs {
			for name, secret := range planted {
				if strings.Contains(out, secret) {
					t.Errorf("%s appears in the %s", name, what)
				}
			}
		}
	})
}

// scrapeAfterShutdown returns the registry's text after the listener is gone.
func (o *observed) scrapeAfterShutdown(t *testing.T) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	o.gw.App.AdminRoutes().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Code, rec.Body.String()
}

// spanText is every name, attribute and event of spans, for the leak search.
func spanText(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintln(&b, s.Name(), s.Status(), s.Attributes())
		for _, e := range s.Events() {
			fmt.Fprintln(&b, e.Name, e.Attributes)
		}
		for _, l := range s.Links() {
			fmt.Fprintln(&b, l.Attributes)
		}
	}
	return b.String()
}

// TestTraceOfOneRequest continues a caller's trace through the gateway: the
// server span is the caller's child, admission, the upstream call and the
// settlement are the server span's, and the upstream got a traceparent naming
// the upstream span.
func TestTraceOfOneRequest(t *testing.T) {
	t.Parallel()
	o := newObserved(t)
	callerTrace, callerSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := anthropicRequest(t, o.gw.URL, o.keys["ada@acme.test"], messagesBody)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	if r := do(t, req); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	// The settle runs after the response; alone in its batch, it is a span of
	// the request's trace (a batch of several has none of its own).
	eventually(t, 5*time.Second, "the settle span ended", func() bool {
		for _, s := range o.gw.Spans.Ended() {
			if s.Name() == "settle" && s.SpanContext().TraceID().String() == callerTrace {
				return true
			}
		}
		return false
	})
	// bob's second request is refused by his own rate limit (not a security
	// event); dan, cut off, tries: a security event on his request's span.
	for range 2 {
		do(t, anthropicRequest(t, o.gw.URL, o.keys["bob@acme.test"], messagesBody))
	}
	do(t, anthropicRequest(t, o.gw.URL, o.keys["dan@acme.test"], messagesBody))

	var spans []sdktrace.ReadOnlySpan
	eventually(t, 5*time.Second, "the server spans ended", func() bool {
		spans = o.gw.Spans.Ended()
		n := 0
		for _, s := range spans {
			if s.SpanKind() == trace.SpanKindServer {
				n++
			}
		}
		return n == 4
	})
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	var server sdktrace.ReadOnlySpan
	for _, s := range byName["POST /anthropic"] {
		if s.SpanContext().TraceID().String() == callerTrace {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span in the caller's trace; spans: %v", names(spans))
	}
	if server.Parent().SpanID().String() != callerSpan || !server.Parent().IsRemote() || server.SpanKind() != trace.SpanKindServer {
		t.Errorf("server span parent %v (remote %v), kind %v: want the caller's span %s", server.Parent().SpanID(),
			server.Parent().IsRemote(), server.SpanKind(), callerSpan)
	}
	attrs := attrMap(server)
	if attrs["http.route"] != "/anthropic" || attrs["tollgate.team"] != "acme" || attrs["http.response.status_code"] != "200" ||
		attrs["tollgate.member_id"] != strconv.FormatInt(o.ada.ID, 10) || attrs["gen_ai.request.model"] != "claude-sonnet-4-5" {
		t.Errorf("server span attributes %v", attrs)
	}
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.Parent().SpanID() == server.SpanContext().SpanID() {
			children[s.Name()] = s
		}
	}
	for _, name := range []string{"admission", "upstream POST", "settle"} {
		if children[name] == nil {
			t.Errorf("no %q child of the server span; its children: %v", name, slices.Collect(maps.Keys(children)))
		}
	}
	if a := children["admission"]; a != nil {
		if got := attrMap(a); got["tollgate.admission.allowed"] != "true" || got["tollgate.admission.reason"] != "none" {
			t.Errorf("admission span attributes %v", got)
		}
	}
	if up := children["upstream POST"]; up != nil {
		if up.SpanKind() != trace.SpanKindClient || attrMap(up)["http.response.status_code"] != "200" {
			t.Errorf("upstream span kind %v attributes %v", up.SpanKind(), attrMap(up))
		}
		wantParent := "00-" + callerTrace + "-" + up.SpanContext().SpanID().String() + "-01"
		o.mu.Lock()
		got := slices.Clone(o.traceparents)
		o.mu.Unlock()
		if !slices.Contains(got, wantParent) {
			t.Errorf("upstream got traceparents %q, want %q", got, wantParent)
		}
	}
	// The cut-off member's server span carries the security event; no span the rate refusal's.
	var refused bool
	for _, s := range spans {
		for _, e := range s.Events() {
			if e.Name != "security event" {
				continue
			}
			attrs := fmt.Sprint(e.Attributes)
			refused = refused || strings.Contains(attrs, "member_cut_off")
			if strings.Contains(attrs, "rate_limit") {
				t.Errorf("span %s carries a security event for a member's own rate limit", s.Name())
			}
		}
	}
	if !refused {
		t.Error("no server span carries the cut-off member's security event")
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}
