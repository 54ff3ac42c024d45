package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/usage"
)

// tollgateName finds metric names in PromQL.
var tollgateName = regexp.MustCompile(`\btollgate_[a-z_]+`)

// TestDashboardAndAlertsNameRealMetrics: every tollgate_* metric the Grafana
// dashboard and the alerts in docs/operations.md query is one this package exports.
func TestDashboardAndAlertsNameRealMetrics(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.Started(1, 7)
	m.Finished(proxy.Outcome{Method: "POST", Status: 200, TeamID: 1, MemberID: 7, RoutePrefix: "/a", Admitted: true, UpstreamStatus: 200,
		CostMicros: 1, BudgetRemaining: 5, Usage: usage.Usage{InputTokens: 1}, UpstreamError: "timeout"})
	m.SecurityEvent("api_key", "refused_invalid")
	m.Limiter(refuser{}).Admit(context.Background(), limiter.Request{})
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
	}

	raw, err := os.ReadFile("../../deploy/grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/tollgate.json: %v", err)
	}
	queried := map[string]string{}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range tollgateName.FindAllString(target.Expr, -1) {
				queried[name] = "dashboard panel " + p.Title
			}
		}
	}
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, alerts, ok := strings.Cut(string(readme), "### Alerts")
	if !ok {
		t.Fatal("docs/operations.md has no ### Alerts section")
	}
	alerts, _, _ = strings.Cut(alerts, "\n#")
	if n := strings.Count(alerts, "```promql"); n != 5 {
		t.Errorf("docs/operations.md alerts section has %d PromQL blocks, want the five alerts", n)
	}
	for _, name := range tollgateName.FindAllString(alerts, -1) {
		queried[name] = "README alert"
	}
	if len(queried) < 10 {
		t.Fatalf("found only %d metric names in the dashboard and alerts", len(queried))
	}
	for name, where := range queried {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			t.Errorf("%s queries %s, which the gateway does not export", where, name)
		}
	}
}
