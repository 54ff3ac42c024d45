package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// pointRoute sets a route's upstream in the database, past every writer's
// check, as an old row or a hand edit would, and reloads gw's snapshot.
func pointRoute(t *testing.T, f *fixture, gw *apptest.Replica, prefix, upstream string) {
	t.Helper()
	_, err := dbtest.Pool(t, f.dbURL).Exec(context.Background(), "UPDATE route SET upstream_url = $1 WHERE team_id = $2 AND prefix = $3",
		upstream, f.team.ID, prefix)
	must(t, err)
	must(t, gw.App.Snapshots.Reload(context.Background()))
}

func getWithKey(t *testing.T, url, key string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	return do(t, req)
}

// TestRoutesCannotReachTheGatewayItself: a route whose upstream is the
// replica's own public or admin listener is refused when saved, and, stored
// anyway, refused at dial time with a provider-shaped 502 that carries nothing
// of /metrics or /debug/pprof. The replica's ordinary routes still work.
func TestRoutesCannotReachTheGatewayItself(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gw := apptest.StartObserved(t, f.dbURL, map[string]string{"ANTHROPIC_API_KEY": anthropicSecret,
		"REDIS_URL": "redis://127.0.0.1:6379/0", "REDIS_KEY_PREFIX": f.redisPrefix, "REDIS_TIMEOUT": "2s"})
	// Once the admin listener answers, Serve has told the guard its listeners.
	if code, body := gw.Admin(t, "/metrics"); code != http.StatusOK || !strings.Contains(body, "tollgate_") {
		t.Fatalf("admin /metrics: %d", code)
	}
	ctx := t.Context()
	adminPort := gw.AdminURL[strings.LastIndex(gw.AdminURL, ":"):]
	for _, upstream := range []string{gw.URL, gw.AdminURL, gw.AdminURL + "/debug/pprof", "http://localhost" + adminPort} {
		_, err := gw.App.Store.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Prefix: "/self", UpstreamURL: upstream, Dialect: "generic"})
		var v *store.ValidationError
		if !errors.As(err, &v) || v.Field != "upstream" || !strings.Contains(v.Message, "own listener") {
			t.Errorf("route to %s: %v, want refused as the gateway's own listener", upstream, err)
		}
	}

	// A generic route, so the path below its prefix reaches the upstream as is.
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "inner") }))
	t.Cleanup(inner.Close)
	_, err := f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Prefix: "/gen", UpstreamURL: inner.URL, Dialect: "generic"})
	must(t, err)
	for _, tc := range []struct{ upstream, path string }{
		{gw.AdminURL, "/gen/metrics"},
		{gw.AdminURL, "/gen/debug/pprof/cmdline"},
		{gw.URL, "/gen/healthz"},
	} {
		pointRoute(t, f, gw.Replica, "/gen", tc.upstream)
		r := getWithKey(t, gw.URL+tc.path, f.key)
		if r.status != http.StatusBadGateway || !strings.Contains(r.body, "refuses to call") {
			t.Errorf("%s through a route to %s: %d %.200s, want 502 refused", tc.path, tc.upstream, r.status, r.body)
		}
		for _, leak := range []string{"tollgate_", "budget", "cmdline", "ok\n", "tollgate serve", "go_"} {
			if strings.Contains(r.body, leak) {
				t.Errorf("%s through a route to %s: the answer carries %q", tc.path, tc.upstream, leak)
			}
		}
	}
	if !strings.Contains(gw.Logs.String(), "upstream_address_guard") {
		t.Error("no upstream_address_guard security event logged")
	}

	// The replica's ordinary route, to an allow-listed loopback upstream, works.
	if r := do(t, anthropicRequest(t, gw.URL, f.key, messagesBody)); r.status != http.StatusOK {
		t.Fatalf("a call through an allow-listed upstream: %d %s", r.status, r.body)
	}
}

// TestNamesCheckedAtDialTime: on a replica whose OUTBOUND_ALLOW does not list
// loopback, a route saved while its name pointed elsewhere (here: saved
// through a writer that allowed loopback) and now resolving to loopback is
// refused when the gateway connects, and nothing of the answer comes back.
func TestNamesCheckedAtDialTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	strict := f.replicaWith(t, map[string]string{"OUTBOUND_ALLOW": "10.0.0.0/8"})
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "internal answer") }))
	t.Cleanup(inner.Close)
	port := inner.URL[strings.LastIndex(inner.URL, ":"):]
	_, err := f.st.AddRoute(t.Context(), store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Prefix: "/gen", UpstreamURL: "http://localhost" + port, Dialect: "generic"})
	must(t, err)
	must(t, strict.App.Snapshots.Reload(t.Context()))
	r := getWithKey(t, strict.URL+"/gen/x", f.key)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "refuses to call") || strings.Contains(r.body, "internal answer") {
		t.Fatalf("a route whose name resolves to loopback: %d %s, want 502 refused", r.status, r.body)
	}
	// The fixture's replica allows loopback: the same route answers there.
	must(t, f.gw.App.Snapshots.Reload(t.Context()))
	if r := getWithKey(t, f.gw.URL+"/gen/x", f.key); r.status != http.StatusOK || r.body != "internal answer" {
		t.Fatalf("the same route on a replica allowing loopback: %d %s", r.status, r.body)
	}
}
