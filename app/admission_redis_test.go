package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/clustertest"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestNewLimiterRedisShapes: the configuration alone picks a single node, a
// Cluster, a Sentinel-managed master or TLS, and one admission works through
// each; a Redis shaped unlike the configuration stops the start with a message
// naming the variable to change.
func TestNewLimiterRedisShapes(t *testing.T) {
	t.Parallel()
	cluster := clustertest.StartCluster(t, 3)

	t.Run("Cluster", func(t *testing.T) {
		t.Parallel()
		lim := shapeLimiter(t, map[string]string{"REDIS_URL": cluster.URL(), "REDIS_CLUSTER": "true"})
		// Teams whose hash tags live on different nodes.
		for _, team := range []string{"team0", "team1", "team2", "team3", "team4", "team5"} {
			shapeAdmitOnce(t, lim, team)
		}
	})
	t.Run("ClusterFromOneSeed", func(t *testing.T) {
		t.Parallel()
		lim := shapeLimiter(t, map[string]string{"REDIS_URL": "redis://" + cluster.Addrs[2], "REDIS_CLUSTER": "true"})
		for _, team := range []string{"team0", "team1", "team2"} {
			shapeAdmitOnce(t, lim, team)
		}
	})
	t.Run("ClusterNodeWithoutClusterMode", func(t *testing.T) {
		t.Parallel()
		err := shapeLimiterErr(t, map[string]string{"REDIS_URL": "redis://" + cluster.Addrs[0]})
		want := "REDIS_URL points at a Redis Cluster node (cluster_enabled:1) but REDIS_CLUSTER is not true: set REDIS_CLUSTER=true"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("NewLimiter = %v, want an error starting %q", err, want)
		}
	})
	t.Run("ClusterModeOnPlainRedis", func(t *testing.T) {
		t.Parallel()
		plain := redistest.StartServer(t)
		err := shapeLimiterErr(t, map[string]string{"REDIS_URL": plain.URL(), "REDIS_CLUSTER": "true"})
		want := "REDIS_CLUSTER is true but REDIS_URL points at a Redis server that is not a Cluster node"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("NewLimiter = %v, want an error starting %q", err, want)
		}
	})
	t.Run("SingleNode", func(t *testing.T) {
		t.Parallel()
		plain := redistest.StartServer(t)
		shapeAdmitOnce(t, shapeLimiter(t, map[string]string{"REDIS_URL": plain.URL()}), "acme")
	})
	t.Run("Sentinel", func(t *testing.T) {
		t.Parallel()
		s := clustertest.StartSentinel(t)
		lim := shapeLimiter(t, map[string]string{"REDIS_URL": s.URL(), "REDIS_SENTINEL_MASTER": s.MasterName,
			"REDIS_SENTINEL_PASSWORD": s.SentinelPW})
		shapeAdmitOnce(t, lim, "acme")
	})
	t.Run("TLSWithCAFile", func(t *testing.T) {
		t.Parallel()
		s := clustertest.StartTLS(t)
		shapeAdmitOnce(t, shapeLimiter(t, map[string]string{"REDIS_URL": s.URL(), "REDIS_TLS_CA_FILE": s.CAFile}), "acme")
	})
	t.Run("TLSUnknownCAIsRefusedNotIgnored", func(t *testing.T) {
		t.Parallel()
		s := clustertest.StartTLS(t)
		var logs bytes.Buffer
		cfg := shapeConfig(t, map[string]string{"REDIS_URL": s.URL()}) // system roots do not know the test's CA
		lim, closeLim, err := app.NewLimiter(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("NewLimiter: %v (an unreachable Redis is logged, not fatal)", err)
		}
		defer closeLim()
		if !strings.Contains(logs.String(), "certificate") {
			t.Errorf("start logs %q, want the certificate problem", logs.String())
		}
		d, err := lim.Admit(context.Background(), limiter.Request{Team: "acme", Member: "ada", KeyID: "k", RequestID: "r1"})
		if err == nil || d.Allowed || d.Reason != limiter.ReasonUnavailable {
			t.Errorf("Admit = %+v, %v; want a fail-closed refusal", d, err)
		}
	})
}

func shapeConfig(t *testing.T, vars map[string]string) config.Config {
	t.Helper()
	vars["REDIS_KEY_PREFIX"] = "shape:" + strings.ReplaceAll(t.Name(), "/", ".") + ":"
	vars["REDIS_TIMEOUT"] = "5s" // a loaded 2-core machine; this test is about shape, not latency
	cfg, err := config.Load(func(name string) string { return vars[name] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func shapeLimiterErr(t *testing.T, vars map[string]string) error {
	t.Helper()
	lim, closeLim, err := app.NewLimiter(context.Background(), shapeConfig(t, vars), slog.New(slog.DiscardHandler))
	if err == nil {
		closeLim()
		if lim == nil {
			t.Error("NewLimiter returned neither a limiter nor an error")
		}
	}
	return err
}

func shapeLimiter(t *testing.T, vars map[string]string) limiter.Limiter {
	t.Helper()
	var logs bytes.Buffer
	lim, closeLim, err := app.NewLimiter(context.Background(), shapeConfig(t, vars), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("NewLimiter: %v", err)
	}
	t.Cleanup(closeLim)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("NewLimiter logged an error: %s", logs.String())
	}
	return lim
}

// admitOnce admits one request with a concurrency cap, refuses a second
// while the first holds the slot, and settles it (freeing the slot).
func shapeAdmitOnce(t *testing.T, lim limiter.Limiter, team string) {
	t.Helper()
	ctx := context.Background()
	req := limiter.Request{Team: team, Member: "ada", KeyID: "k", RequestID: "first",
		MemberPolicy: limiter.Policy{Concurrency: 1}, Lease: time.Minute}
	if d, err := lim.Admit(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("team %s: Admit = %+v, %v; want allowed", team, d, err)
	}
	req.RequestID = "second"
	if d, err := lim.Admit(ctx, req); err != nil || d.Reason != limiter.ReasonConcurrency {
		t.Fatalf("team %s: second Admit = %+v, %v; want a concurrency refusal", team, d, err)
	}
	if _, err := lim.Settle(ctx, limiter.Settlement{Team: team, Member: "ada", RequestID: "first"}); err != nil {
		t.Fatalf("team %s: Settle: %v", team, err)
	}
}
