package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// readyz polls /readyz until its status is want, and returns its body.
func readyz(t *testing.T, gw *apptest.Observed, want int, why string) string {
	t.Helper()
	var body string
	eventually(t, 10*time.Second, why, func() bool {
		var status int
		status, body = gw.Admin(t, "/readyz")
		return status == want
	})
	return body
}

// TestReadinessFollowsDependencies: /readyz turns 503 naming the dependency
// when Postgres or Redis stops answering, while /healthz (alive) stays 200.
func TestReadinessFollowsDependencies(t *testing.T) {
	t.Parallel()
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pg := apptest.NewTCPProxy(t, "127.0.0.1:5432")
		gw := apptest.StartObserved(t, pg.Via(dbtest.Schema(t)), nil)
		body := readyz(t, gw, http.StatusOK, "ready")
		for _, line := range []string{"ok   postgres", "ok   snapshot", "ok   ledger", "ok   draining"} {
			if !strings.Contains(body, line) {
				t.Errorf("/readyz = %q, want a line %q", body, line)
			}
		}
		pg.Stop()
		if body := readyz(t, gw, http.StatusServiceUnavailable, "not ready without Postgres"); !strings.Contains(body, "fail postgres") {
			t.Errorf("/readyz = %q, want it to name postgres", body)
		}
		if status, _ := gw.Admin(t, "/healthz"); status != http.StatusOK {
			t.Errorf("admin /healthz = %d without Postgres, want 200: the process is alive", status)
		}
	})
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		redis := redistest.StartServer(t)
		gw := apptest.StartObserved(t, dbtest.Schema(t), map[string]string{"REDIS_URL": redis.URL(), "REDIS_KEY_PREFIX": redistest.Prefix(t)})
		if body := readyz(t, gw, http.StatusOK, "ready"); !strings.Contains(body, "ok   redis") {
			t.Errorf("/readyz = %q, want a redis line", body)
		}
		redis.Kill()
		if body := readyz(t, gw, http.StatusServiceUnavailable, "not ready without Redis"); !strings.Contains(body, "fail redis") {
			t.Errorf("/readyz = %q, want it to name redis", body)
		}
		redis.Start()
		readyz(t, gw, http.StatusOK, "ready again once Redis is back")
	})
}

// TestDrainTurnsReadinessFirst: the admin listener serves what the public one
// does not; on SIGTERM /readyz answers 503 at once while the public listener
// keeps serving for DRAIN_DELAY, then stops.
func TestDrainTurnsReadinessFirst(t *testing.T) {
	t.Parallel()
	gw := apptest.StartObserved(t, dbtest.Schema(t), map[string]string{"DRAIN_DELAY": "2s"})
	readyz(t, gw, http.StatusOK, "ready")
	for _, path := range []string{"/healthz", "/metrics", "/debug/pprof/"} {
		if status, _ := gw.Admin(t, path); status != http.StatusOK {
			t.Errorf("admin %s = %d, want 200", path, status)
		}
	}
	// Metrics, readiness and pprof are not on the tenants' listener.
	for _, path := range []string{"/metrics", "/readyz", "/debug/pprof/"} {
		resp, err := http.Get(gw.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("public %s = 200; it belongs on the admin listener only", path)
		}
	}
	began := time.Now()
	gw.BeginShutdown()
	if body := readyz(t, gw, http.StatusServiceUnavailable, "draining"); !strings.Contains(body, "fail draining") {
		t.Errorf("/readyz = %q, want draining", body)
	}
	resp, err := http.Get(gw.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("public listener during the drain delay: %v %v, want 200", resp, err)
	}
	resp.Body.Close()
	if err := gw.Shutdown(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 2*time.Second {
		t.Errorf("stopped %s after SIGTERM, before DRAIN_DELAY", d)
	}
	if _, err := http.Get(gw.URL + "/healthz"); err == nil {
		t.Error("public listener still answers after the drain")
	}
}
