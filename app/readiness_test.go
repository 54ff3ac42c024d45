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

// TestReadinessFollowsDependencies: with Redis configured or not, /readyz
// names exactly the dependencies that stop answering (Postgres cut by a
// forwarder, Redis killed, or both) and is ready again once they are back,
// while /healthz (alive) stays 200. Under -race it also covers the concurrent
// pings.
func TestReadinessFollowsDependencies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		redis            bool
		cutPG, killRedis bool
	}{
		{name: "without Redis, Postgres cut", cutPG: true},
		{name: "with Redis, Postgres cut", redis: true, cutPG: true},
		{name: "with Redis, Redis killed", redis: true, killRedis: true},
		{name: "with Redis, both gone", redis: true, cutPG: true, killRedis: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pg := apptest.NewTCPProxy(t, "127.0.0.1:5432")
			env := map[string]string{}
			var redis *redistest.Server
			if tc.redis {
				redis = redistest.StartServer(t)
				env["REDIS_URL"], env["REDIS_KEY_PREFIX"] = redis.URL(), redistest.Prefix(t)
			}
			gw := apptest.StartObserved(t, pg.Via(dbtest.Schema(t)), env)
			want := []string{"ok   postgres", "ok   snapshot", "ok   ledger", "ok   draining"}
			if tc.redis {
				want = append(want, "ok   redis")
			}
			body := readyz(t, gw, http.StatusOK, "ready")
			for _, line := range want {
				if !strings.Contains(body, line) {
					t.Errorf("/readyz = %q, want a line %q", body, line)
				}
			}
			if tc.cutPG {
				pg.Stop()
			}
			if tc.killRedis {
				redis.Kill()
			}
			body = readyz(t, gw, http.StatusServiceUnavailable, "not ready")
			for dep, gone := range map[string]bool{"postgres": tc.cutPG, "redis": tc.killRedis} {
				if gone && !strings.Contains(body, "fail "+dep+":") {
					t.Errorf("/readyz = %q, want it to fail %s", body, dep)
				}
				if !gone && strings.Contains(body, "fail "+dep) {
					t.Errorf("/readyz = %q, but %s is up", body, dep)
				}
			}
			if tc.redis && !tc.killRedis && !strings.Contains(body, "ok   redis") {
				t.Errorf("/readyz = %q, want ok redis", body)
			}
			if status, _ := gw.Admin(t, "/healthz"); status != http.StatusOK {
				t.Errorf("admin /healthz = %d, want 200: the process is alive", status)
			}
			if tc.killRedis && !tc.cutPG {
				redis.Start()
				readyz(t, gw, http.StatusOK, "ready again once Redis is back")
			}
		})
	}
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
