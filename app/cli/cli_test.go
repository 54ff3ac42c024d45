package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// syncBuffer takes the server goroutine's writes while the test reads.
type syncBuffer = apptest.SyncBuffer

// tool runs commands against one database schema with a map-backed environment.
type tool struct {
	t    *testing.T
	vars map[string]string
}

// newTool gives the test its own migrated schema.
func newTool(t *testing.T) *tool {
	t.Helper()
	// dev mode uses the local Redis when REDIS_URL is unset: keep this test's keys apart.
	return &tool{t: t, vars: map[string]string{"DATABASE_URL": dbtest.Schema(t), "REDIS_KEY_PREFIX": redistest.Prefix(t),
		"ADMIN_ADDR": "127.0.0.1:0", "DRAIN_DELAY": "0s", "OUTBOUND_ALLOW": "127.0.0.0/8"}}
}

func (c *tool) env(stdout, stderr *syncBuffer) cli.Env {
	return cli.Env{Getenv: func(name string) string { return c.vars[name] }, Stdout: stdout, Stderr: stderr}
}

// run runs one command line and returns what it printed.
func (c *tool) run(args ...string) (string, error) {
	c.t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	err := cli.Run(ctx, args, c.env(&stdout, &stderr))
	return stdout.String(), err
}

// ok runs a command that must succeed.
func (c *tool) ok(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("tollgate %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// json runs an admin command with --json and decodes its output into v.
func (c *tool) json(v any, args ...string) string {
	c.t.Helper()
	out := c.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("tollgate %s --json: %v in %q", strings.Join(args, " "), err, out)
	}
	return out
}

// noDB is an environment whose database no command may need.
func noDB(t *testing.T) *tool {
	return &tool{t: t, vars: map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	c := noDB(t)
	// A test binary is stamped with no commit; describeBuild's own test covers that part.
	if out := c.ok("version"); !regexp.MustCompile(`^tollgate \S+ \(no VCS commit stamped\)\n$`).MatchString(out) {
		t.Errorf("version printed %q, want one line `tollgate <version> (no VCS commit stamped)`", out)
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"admin", "help"}} {
		if out := c.ok(args...); !strings.Contains(out, "usage: tollgate") {
			t.Errorf("tollgate %v printed %q, want the usage", args, out)
		}
	}
	// No verb is a mistake, as no command is: exit 2 (a UsageError), usage on stderr.
	out, err := c.run("admin")
	if _, ok := errors.AsType[*cli.UsageError](err); !ok || out != "" || !strings.Contains(err.Error(), "usage: tollgate admin <verb>") {
		t.Errorf("tollgate admin: err %v (%T), stdout %q; want a UsageError carrying the admin usage and nothing on stdout", err, err, out)
	}
}

func TestUsageMistakesNeedNoDatabase(t *testing.T) {
	t.Parallel()
	c := noDB(t)
	tests := []struct {
		args []string
		want string
	}{
		{nil, "missing command; run tollgate help"},
		{[]string{"launch"}, `unknown command "launch"`},
		{[]string{"admin", "delete-team"}, `unknown admin verb "delete-team"`},
		{[]string{"serve", "--port", "80"}, "flag provided but not defined: -port"},
		{[]string{"dev", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		out, err := c.run(tt.args...)
		if _, ok := errors.AsType[*cli.UsageError](err); !ok {
			t.Errorf("tollgate %v: err = %v (%T), want a *cli.UsageError", tt.args, err, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) || out != "" {
			t.Errorf("tollgate %v: err %q, stdout %q; want one line saying %q and no output", tt.args, err, out, tt.want)
		}
	}
}

func TestConfigurationErrorNamesVariable(t *testing.T) {
	t.Parallel()
	c := &tool{t: t, vars: map[string]string{"DATABASE_URL": "mysql://db/x", "LOG_LEVEL": "loud"}}
	for _, args := range [][]string{{"migrate"}, {"admin", "list", "teams"}, {"serve"}, {"dev"}} {
		_, err := c.run(args...)
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "LOG_LEVEL") {
			t.Errorf("tollgate %v: err = %v, want both bad variables named", args, err)
		}
	}
}

func TestMigratePrintsVersion(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("../../migrations")
	if err != nil {
		t.Fatal(err)
	}
	var newest int64
	for _, e := range entries {
		if n, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64); err == nil && strings.HasSuffix(e.Name(), ".sql") {
			newest = max(newest, n)
		}
	}
	c := newTool(t)
	for range 2 { // idempotent
		if out, want := c.ok("migrate"), "database is at migration "+strconv.FormatInt(newest, 10)+"\n"; out != want {
			t.Errorf("migrate printed %q, want %q", out, want)
		}
	}
}

// devKey matches the key dev mode prints for the newcomer.
var devKey = regexp.MustCompile(`export TOLLGATE_KEY=(tg_[a-z2-7]{13}_[a-z2-7]{52})\n`)

// devRun is one running `tollgate dev`.
type devRun struct {
	url, key string
	banner   string // what it printed on stdout
	logs     *syncBuffer
	stop     func()
}

// runDev starts dev mode with its mock provider on mockAddr, returns its URL,
// key and banner, and a stop func that cancels it and checks it shut down cleanly.
func runDev(t *testing.T, c *tool, mockAddr string) devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	var stdout, stderr syncBuffer
	env := c.env(&stdout, &stderr)
	env.Listen = func(string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	env.Ready = func(u string) { ready <- u }
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"dev", "--mock-addr", mockAddr}, env) }()
	stopped := false
	stop := func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dev returned %v after cancel, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("dev did not stop within 30s of cancel")
		}
	}
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("dev exited before ready: %v\nstderr: %s", err, stderr.String())
	case <-time.After(time.Minute):
		stop()
		t.Fatal("dev not ready within a minute")
	}
	m := devKey.FindAllStringSubmatch(stdout.String(), -1)
	if len(m) != 1 || strings.Count(stdout.String(), m[0][1]) != 1 {
		stop()
		t.Fatalf("dev printed %d keys, want the key exactly once:\n%s", len(m), stdout.String())
	}
	return devRun{url: url, key: m[0][1], banner: stdout.String(), logs: &stderr, stop: stop}
}

// message sends the newcomer's first call, as the printed curl does.
func message(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/anthropic/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp, buf.Bytes()
}

type devRoute struct {
	Prefix        string
	UpstreamURL   string `json:"upstream_url"`
	CredentialEnv string `json:"credential_env"`
}

func devRoutes(c *tool) []devRoute {
	var routes []devRoute
	c.json(&routes, "admin", "list", "routes", "--team", "local")
	return routes
}

func TestDevServesFirstCall(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	run := runDev(t, c, "127.0.0.1:0")
	defer run.stop()
	resp, body := message(t, run.url, run.key)
	var msg struct {
		Type  string `json:"type"`
		Usage *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &msg) != nil || msg.Type != "message" ||
		msg.Usage == nil || msg.Usage.InputTokens <= 0 || msg.Usage.OutputTokens <= 0 {
		t.Errorf("POST /anthropic/v1/messages = %d %s, want 200 with a message and its usage", resp.StatusCode, body)
	}
	wrong := run.key[:len(run.key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(run.key, "a")]
	if resp, body := message(t, run.url, wrong); resp.StatusCode != http.StatusUnauthorized || bytes.Contains(body, []byte(wrong)) {
		t.Errorf("wrong key: %d %s, want 401 without the key echoed", resp.StatusCode, body)
	}
	routes := devRoutes(c)
	if len(routes) != 2 || !strings.HasPrefix(routes[0].UpstreamURL, "http://127.0.0.1:") || routes[0].UpstreamURL != routes[1].UpstreamURL {
		t.Fatalf("dev routes = %+v, want the two presets on the local mock", routes)
	}
	for _, r := range routes {
		if want := "  " + r.Prefix; !strings.Contains(run.banner, want) || !strings.Contains(run.banner, r.UpstreamURL+", the built-in mock provider") {
			t.Errorf("banner does not say %s goes to the built-in mock at %s:\n%s", r.Prefix, r.UpstreamURL, run.banner)
		}
	}
	if strings.Contains(run.banner, "billed to") || !strings.Contains(run.banner, "the next make run issues another and leaves this one working") {
		t.Errorf("first run's banner:\n%s\nwant nothing billed and the key's fate said", run.banner)
	}
	// The CLI cannot see the dev process's mock credential; it must not call it unset.
	wantOutput(t, "list routes", c.ok("admin", "list", "routes", "--team", "local"),
		"x-api-key from $TOLLGATE_CREDENTIAL_MOCK (not set in this shell; tollgate dev sets it in its own process for its built-in mock)")
}

// TestDevRerunLeavesRunningInstanceAlone: a second make run on the same
// database, while the first still runs, with another --mock-addr, does not
// re-point the shared routes and revokes no key: the first run's printed key
// still answers 200 on both gateways, and each run prints the owner's way in.
// Once the first has stopped, the next run points the routes at its own mock.
func TestDevRerunLeavesRunningInstanceAlone(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	first := runDev(t, c, "127.0.0.1:0")
	defer first.stop()
	before := devRoutes(c)

	second := runDev(t, c, "127.0.0.1:0")
	defer second.stop()
	if after := devRoutes(c); !slices.Equal(after, before) {
		t.Errorf("routes after a second run = %+v, want them untouched: %+v", after, before)
	}
	if !strings.Contains(second.banner, before[0].UpstreamURL+", the mock of another make run") {
		t.Errorf("second banner does not say it uses the first run's mock at %s:\n%s", before[0].UpstreamURL, second.banner)
	}
	if !strings.Contains(second.banner, "the 1 key(s) earlier make runs printed still work") {
		t.Errorf("second banner does not say the first run's key still works:\n%s", second.banner)
	}
	for _, run := range []devRun{first, second} {
		if !ownerInvite.MatchString(run.banner) {
			t.Errorf("banner prints no one-time way in for the owner:\n%s", run.banner)
		}
	}
	for _, gw := range []string{first.url, second.url} {
		for _, key := range []string{first.key, second.key} {
			if resp, body := message(t, gw, key); resp.StatusCode != http.StatusOK {
				t.Errorf("key %s on %s: %d %s, want 200", strings.Split(key, "_")[1], gw, resp.StatusCode, body)
			}
		}
	}

	first.stop()
	second.stop()
	third := runDev(t, c, "127.0.0.1:0")
	defer third.stop()
	routes := devRoutes(c)
	if routes[0].UpstreamURL == before[0].UpstreamURL || !strings.Contains(third.banner, routes[0].UpstreamURL+", the built-in mock provider") {
		t.Errorf("third run, the first's mock gone: routes %+v, banner:\n%s\nwant them on its own mock", routes, third.banner)
	}
	if resp, body := message(t, third.url, third.key); resp.StatusCode != http.StatusOK {
		t.Errorf("third run: %d %s", resp.StatusCode, body)
	}
}

// ownerInvite is the one-time link make run prints while the owner has no password.
var ownerInvite = regexp.MustCompile(`\n  http://\S+/console/invite/\S+ \(one-time: sets owner@localhost\.localdomain's password\)\n`)

// TestDevRerunAfterStopClaimsNoOtherInstance: make run, stopped, then run
// again on the same database and mock address finds no other instance (its
// own new mock answers at the old address, which is not another run's), and
// prints the owner's way in again.
func TestDevRerunAfterStopClaimsNoOtherInstance(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	addr := "127.0.0.1:" + freePort(t)
	first := runDev(t, c, addr)
	first.stop()
	second := runDev(t, c, addr)
	defer second.stop()
	for i, run := range []devRun{first, second} {
		if strings.Contains(run.banner, "another make run") {
			t.Errorf("run %d claims another instance's mock, none running:\n%s", i+1, run.banner)
		}
		if !ownerInvite.MatchString(run.banner) {
			t.Errorf("run %d prints no one-time way in for the owner:\n%s", i+1, run.banner)
		}
	}
	if resp, body := message(t, second.url, first.key); resp.StatusCode != http.StatusOK {
		t.Errorf("the first run's key after the second started: %d %s, want 200", resp.StatusCode, body)
	}
}

// TestDevBannerSaysWhichRouteIsReal: with only ANTHROPIC_API_KEY set, the
// banner says /anthropic reaches the real, billed API and /openai the mock.
func TestDevBannerSaysWhichRouteIsReal(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.vars["ANTHROPIC_API_KEY"] = "sk-ant-test-not-used"
	run := runDev(t, c, "127.0.0.1:0")
	defer run.stop()
	routes := devRoutes(c)
	if len(routes) != 2 || routes[0].Prefix != "/anthropic" || routes[0].UpstreamURL != "https://api.anthropic.com" || routes[0].CredentialEnv != "ANTHROPIC_API_KEY" {
		t.Fatalf("routes = %+v, want /anthropic on the real API", routes)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\n  /anthropic +-> https://api\.anthropic\.com with \$ANTHROPIC_API_KEY: the real provider, calls are billed`),
		regexp.MustCompile(`\n  /openai +-> ` + regexp.QuoteMeta(routes[1].UpstreamURL) + `, the built-in mock provider`),
		regexp.MustCompile(`this call goes to the real Anthropic API and is billed`),
	} {
		if !want.MatchString(run.banner) {
			t.Errorf("banner does not match %s:\n%s", want, run.banner)
		}
	}
	if strings.Count(run.banner, "mock") != 1 {
		t.Errorf("banner mentions the mock %d times, want once (for /openai only):\n%s", strings.Count(run.banner, "mock"), run.banner)
	}
}
