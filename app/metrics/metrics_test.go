package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/app/metrics"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/estimate"
	"github.com/tollgate/tollgate/proxy/providerlimits"
	"github.com/tollgate/tollgate/proxy/usage"
)

type snaps struct{ s *proxy.Snapshot }

func (s snaps) Current() *proxy.Snapshot { return s.s }
func (s snaps) Reloads() int64           { return 3 }

type backlog struct{}

func (backlog) Backlog() (int, time.Duration) { return 4, 2 * time.Second }

func newMetrics() *metrics.Metrics {
	snap := proxy.NewSnapshot([]proxy.Team{{ID: 1, Name: "acme"}}, nil, nil, nil, estimate.Table{}, time.Now().Add(-time.Minute))
	return metrics.New(metrics.Options{Snapshots: snaps{snap}, Ledger: backlog{},
		RedisStats: func() limiter.Stats { return limiter.Stats{FailClosed: 2} }})
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestLabelsComeOnlyFromConfig(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	ok := proxy.Outcome{Method: "POST", Status: 200, TeamID: 1, MemberID: 7, RoutePrefix: "/anthropic", Admitted: true,
		UpstreamStatus: 200, TTFB: time.Second, Duration: 2 * time.Second, CostMicros: 1500, BudgetRemaining: 98500,
		Usage: usage.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5}}
	m.Started(1, 7)
	m.Finished(ok)
	// Whatever a caller sends, the labels stay in their fixed sets.
	for _, o := range []proxy.Outcome{
		{Method: "PROPFIND", Status: 405},
		{Method: "POST", Status: 404, TeamID: 1, MemberID: 7, Refusal: "no_route"},
		{Method: "POST", Status: 401, Refusal: "some-future-code"},
		{Method: "GET", Status: 0, TeamID: 99, MemberID: 1, RoutePrefix: "/x", Admitted: true, UpstreamError: "client_gone"},
	} {
		if o.Admitted {
			m.Started(o.TeamID, o.MemberID)
		}
		o.BudgetRemaining = -1
		m.Finished(o)
	}
	text := scrape(t, m)
	for _, want := range []string{
		`tollgate_requests_total{code_class="2xx",member="7",method="POST",route="/anthropic",team="acme"} 1`,
		`tollgate_requests_total{code_class="4xx",member="unknown",method="other",route="none",team="unknown"} 1`,
		`tollgate_requests_total{code_class="4xx",member="7",method="POST",route="none",team="acme"} 1`,
		`tollgate_requests_total{code_class="none",member="1",method="GET",route="/x",team="unknown"} 1`,
		`tollgate_admission_decisions_total{outcome="admitted",reason="none"} 2`,
		`tollgate_admission_decisions_total{outcome="refused",reason="other"} 2`,
		`tollgate_admission_decisions_total{outcome="refused",reason="no_route"} 1`,
		`tollgate_spend_micros_total{member="7",team="acme"} 1500`,
		`tollgate_tokens_total{class="input",member="7",team="acme"} 100`,
		`tollgate_tokens_total{class="cache_read",member="7",team="acme"} 5`,
		`tollgate_budget_remaining_micros{member="7",team="acme"} 98500`,
		`tollgate_upstream_ttfb_seconds_count{route="/anthropic"} 1`,
		`tollgate_upstream_errors_total{kind="client_gone",route="/x"} 1`,
		`tollgate_in_flight 0`,
		`tollgate_config_reloads_total 3`,
		`tollgate_ledger_pending_rows 4`,
		`tollgate_ledger_oldest_pending_seconds 2`,
		`tollgate_redis_fallback_decisions_total{decision="fail_closed"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no line %s", want)
		}
	}
	for _, leaked := range []string{"PROPFIND", "some-future-code"} {
		if strings.Contains(text, leaked) {
			t.Errorf("request data %q became a label", leaked)
		}
	}
	if n, err := testutil.GatherAndCount(m.Registry(), "tollgate_snapshot_age_seconds"); err != nil || n != 1 {
		t.Errorf("snapshot age: %d %v", n, err)
	}
}

type refuser struct{ limiter.Limiter }

func (refuser) Admit(context.Context, limiter.Request) (limiter.Decision, error) {
	return limiter.Decision{Reason: limiter.ReasonRate}, nil
}

func TestAdmissionIsTimed(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	lim := m.Limiter(refuser{})
	for range 3 {
		lim.Admit(context.Background(), limiter.Request{})
	}
	if !strings.Contains(scrape(t, m), "tollgate_admission_duration_seconds_count 3\n") {
		t.Error("three admissions not timed")
	}
}

func TestSecurityEventsCounted(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.SecurityEvent("api_key", "refused_invalid")
	m.SecurityEvent("api_key", "refused_invalid")
	if !strings.Contains(scrape(t, m), `tollgate_security_events_total{control="api_key",outcome="refused_invalid"} 2`) {
		t.Error("security events not counted")
	}
}

// TestProviderLimitsReported: the learned remaining capacity per target and
// the requests held or refused because of it, labelled by the operator's
// upstream and credential variable; a capacity not yet reported is absent.
func TestProviderLimitsReported(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.WatchProviderLimits(func() []providerlimits.Stat {
		return []providerlimits.Stat{{Key: providerlimits.Key{ID: "x", Upstream: "api.anthropic.com", Credential: "ANTHROPIC_API_KEY"},
			RequestsRemaining: 7, TokensRemaining: -1, Held: 3, Refused: 2}}
	})
	body := scrape(t, m)
	for _, want := range []string{
		`tollgate_provider_limit_remaining{credential="ANTHROPIC_API_KEY",kind="requests",upstream="api.anthropic.com"} 7`,
		`tollgate_provider_limit_decisions_total{credential="ANTHROPIC_API_KEY",decision="held",upstream="api.anthropic.com"} 3`,
		`tollgate_provider_limit_decisions_total{credential="ANTHROPIC_API_KEY",decision="refused",upstream="api.anthropic.com"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, `kind="tokens"`) {
		t.Error("a tokens capacity never reported is exported")
	}
}
