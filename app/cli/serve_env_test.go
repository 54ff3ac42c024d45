package cli_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/limiter/clustertest"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// TestServeWithFlyEnvironment: serve starts with nothing but what Fly gives a
// machine (PORT, FLY_APP_NAME, and the DATABASE_URL and REDIS_URL secrets),
// listens on $PORT, answers the health check and prints the first-run setup
// link on the app's fly.dev address. The local Postgres has no TLS, so
// DATABASE_URL says sslmode=disable, as `fly postgres attach` does; a managed
// Postgres's sslmode=require goes through the same pgx connection string.
func TestServeWithFlyEnvironment(t *testing.T) {
	t.Parallel()
	t.Run("UpstashRedis", func(t *testing.T) {
		t.Parallel()
		serveLikeFly(t, map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0", "REDIS_KEY_PREFIX": redistest.Prefix(t)})
	})
	t.Run("ManagedRedisOverTLS", func(t *testing.T) {
		t.Parallel()
		s := clustertest.StartTLS(t)
		serveLikeFly(t, map[string]string{"REDIS_URL": s.URL(), "REDIS_TLS_CA_FILE": s.CAFile})
	})
}

func serveLikeFly(t *testing.T, redis map[string]string) {
	t.Helper()
	port := freePort(t)
	vars := map[string]string{"PORT": port, "FLY_APP_NAME": "acme-gw", "DATABASE_URL": dbtest.Schema(t),
		"ADMIN_ADDR": "127.0.0.1:0", "DRAIN_DELAY": "0s"}
	for k, v := range redis {
		vars[k] = v
	}
	if !strings.Contains(vars["DATABASE_URL"], "sslmode=disable") {
		t.Fatalf("DATABASE_URL %s: want sslmode=disable against the local Postgres", vars["DATABASE_URL"])
	}
	var stdout, stderr syncBuffer
	asked := make(chan string, 1)
	ready := make(chan string, 1)
	env := cli.Env{Getenv: func(name string) string { return vars[name] }, Stdout: &stdout, Stderr: &stderr,
		// serve asks for :$PORT (every interface, as Fly's proxy needs); the
		// test listens on that port on loopback only.
		Listen: func(addr string) (net.Listener, error) {
			asked <- addr
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen("tcp", "127.0.0.1:"+p)
		},
		Ready: func(u string) { ready <- u },
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"serve"}, env) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve returned %v after cancel", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s")
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve exited: %v\nstderr: %s", err, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve not ready within a minute\nstderr: %s", stderr.String())
	}
	if addr := <-asked; addr != ":"+port {
		t.Errorf("serve listened on %q, want :%s from PORT", addr, port)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
	// The admin listener serves the metrics Fly's [metrics] section scrapes.
	admin := regexp.MustCompile(`"msg":"admin listener[^"]*","addr":"([^"]+)"`).FindStringSubmatch(stderr.String())
	if admin == nil {
		t.Fatalf("serve logged no admin listener:\n%s", stderr.String())
	}
	metrics, err := http.Get("http://" + admin[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(metrics.Body)
	metrics.Body.Close()
	if metrics.StatusCode != http.StatusOK || !strings.Contains(string(body), "tollgate_config_reloads_total") {
		t.Errorf("GET /metrics on the admin listener = %d, want 200 with tollgate metrics", metrics.StatusCode)
	}
	if !strings.Contains(stdout.String(), "https://acme-gw.fly.dev/") {
		t.Errorf("serve printed %q, want a first-run setup link on https://acme-gw.fly.dev", stdout.String())
	}
	if strings.Contains(stderr.String(), `"level":"ERROR"`) {
		t.Errorf("serve logged an error:\n%s", stderr.String())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func TestServeCheckConfig(t *testing.T) {
	t.Parallel()
	run := func(vars map[string]string, args ...string) (string, error) {
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := cli.Run(ctx, append([]string{"serve", "--check-config"}, args...),
			cli.Env{Getenv: func(n string) string { return vars[n] }, Stdout: &stdout, Stderr: &stderr,
				Listen: func(string) (net.Listener, error) { t.Error("--check-config listened"); return nil, errors.New("no") }})
		return stdout.String(), err
	}

	t.Run("EveryProblemOnItsOwnLine", func(t *testing.T) {
		t.Parallel()
		_, err := run(map[string]string{"PORT": "eighty", "LOG_LEVEL": "loud", "REDIS_URL": "redis://:hunter2@h:0"})
		if err == nil {
			t.Fatal("--check-config accepted a bad environment")
		}
		lines := strings.Split(err.Error(), "\n")
		want := []string{"configuration:",
			`PORT must be a port from 1 to 65535, not "eighty"`,
			`REDIS_URL host "h:0" must have a port from 1 to 65535`,
			`LOG_LEVEL must be debug, info, warn or error, not "loud"`}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("--check-config error:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
		}
		if _, usage := errors.AsType[*cli.UsageError](err); usage {
			t.Error("a bad environment is a usage error (exit 2), want exit 1")
		}
	})
	t.Run("GoodEnvironmentNeedsNoServices", func(t *testing.T) {
		t.Parallel()
		out, err := run(map[string]string{"DATABASE_URL": "postgres://u:pw@db.invalid:5432/x?sslmode=require",
			"REDIS_URL": "rediss://:pw@a.invalid:6380,b.invalid:6380", "REDIS_CLUSTER": "true"})
		if err != nil || !strings.HasPrefix(out, "configuration ok\n") || !strings.Contains(out, "cluster, 2 host(s), TLS") ||
			strings.Contains(out, "pw") {
			t.Errorf("--check-config = %q, %v; want ok, the Redis shape and no password", out, err)
		}
	})
	t.Run("ConnectReachesPostgresAndRedis", func(t *testing.T) {
		t.Parallel()
		out, err := run(map[string]string{"DATABASE_URL": dbtest.Schema(t), "REDIS_URL": "redis://127.0.0.1:6379/0"}, "--connect")
		if err != nil || !strings.Contains(out, "postgres  answers") || !strings.Contains(out, "redis     answers") {
			t.Errorf("--check-config --connect = %q, %v; want both answering", out, err)
		}
	})
	t.Run("ConnectReportsWhatDoesNotAnswer", func(t *testing.T) {
		t.Parallel()
		closed := freePort(t)
		_, err := run(map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:" + closed + "/x?sslmode=disable",
			"REDIS_URL": "redis://127.0.0.1:" + closed}, "--connect")
		if err == nil || !strings.Contains(err.Error(), "\nDATABASE_URL: Postgres does not answer") ||
			!strings.Contains(err.Error(), "\nREDIS_URL: Redis does not answer") {
			t.Errorf("--check-config --connect = %v; want both named on their own lines", err)
		}
	})
	t.Run("ConnectAloneIsAUsageError", func(t *testing.T) {
		t.Parallel()
		var out syncBuffer
		err := cli.Run(t.Context(), []string{"serve", "--connect"}, cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
		if _, ok := errors.AsType[*cli.UsageError](err); !ok {
			t.Errorf("serve --connect = %v, want a usage error", err)
		}
	})
}

// TestDevWithExternalMock is docker compose's gateway: dev routes the local
// team to a mock provider that is already running, injecting its key from
// TOLLGATE_CREDENTIAL_MOCK.
func TestDevWithExternalMock(t *testing.T) {
	t.Parallel()
	const mockKey = "compose-style-mock-key"
	m := mock.New(mock.Options{AnthropicKey: mockKey, OpenAIKey: mockKey})
	upstream := httptest.NewServer(m)
	defer upstream.Close()

	c := newTool(t)
	if _, err := c.run("dev", "--mock-url", upstream.URL); err == nil || !strings.Contains(err.Error(), "TOLLGATE_CREDENTIAL_MOCK") {
		t.Errorf("dev --mock-url without TOLLGATE_CREDENTIAL_MOCK = %v, want a usage error naming it", err)
	}
	c.vars["TOLLGATE_CREDENTIAL_MOCK"] = mockKey
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	env := c.env(&stdout, &stderr)
	env.Listen = func(string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	ready := make(chan string, 1)
	env.Ready = func(u string) { ready <- u }
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"dev", "--mock-url", upstream.URL}, env) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev returned %v after cancel", err)
		}
	}()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("dev exited: %v\n%s", err, stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("dev not ready within a minute")
	}
	k := devKey.FindStringSubmatch(stdout.String())
	if k == nil {
		t.Fatalf("dev printed no key:\n%s", stdout.String())
	}
	if resp, body := message(t, url, k[1]); resp.StatusCode != http.StatusOK || len(m.Records()) != 1 {
		t.Errorf("call through dev --mock-url = %d %s, mock saw %d requests; want 200 and 1", resp.StatusCode, body, len(m.Records()))
	}
}
