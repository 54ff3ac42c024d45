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
		"ADMIN_ADDR": "127.0.0.1:0", "DRAIN_DELAY": "0s"}}
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

// runDev starts dev mode with its mock provider on mockAddr, returns its URL and
// key, and a stop func that cancels it and checks it shut down cleanly.
func runDev(t *testing.T, c *tool, mockAddr string) (url, key string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	var stdout, stderr syncBuffer
	env := c.env(&stdout, &stderr)
	env.Listen = func(string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	env.Ready = func(u string) { ready <- u }
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"dev", "--mock-addr", mockAddr}, env) }()
	stop = func() {
		t.Helper()
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
	return url, m[0][1], stop
}

// message sends the newcomer's first call, as the printed curl does.
func message(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`
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

func TestDevServesFirstCall(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	url, key, stop := runDev(t, c, "127.0.0.1:0")
	resp, body := message(t, url, key)
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
	wrong := key[:len(key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(key, "a")]
	if resp, body := message(t, url, wrong); resp.StatusCode != http.StatusUnauthorized || bytes.Contains(body, []byte(wrong)) {
		t.Errorf("wrong key: %d %s, want 401 without the key echoed", resp.StatusCode, body)
	}
	var routes []struct {
		Prefix      string
		UpstreamURL string `json:"upstream_url"`
	}
	c.json(&routes, "admin", "list", "routes", "--team", "local")
	if len(routes) != 2 || !strings.HasPrefix(routes[0].UpstreamURL, "http://127.0.0.1:") {
		t.Fatalf("dev routes = %+v, want the two presets on the local mock", routes)
	}
	stop()

	// A second run on the same database (and the same mock address, as with the
	// default --mock-addr) reuses the team and issues a new key; the first key
	// still works.
	url, key2, stop := runDev(t, c, strings.TrimPrefix(routes[0].UpstreamURL, "http://"))
	defer stop()
	if key2 == key {
		t.Error("second dev run printed the same key")
	}
	for _, k := range []string{key, key2} {
		if resp, body := message(t, url, k); resp.StatusCode != http.StatusOK {
			t.Errorf("second run, key %s…: %d %s", k[:16], resp.StatusCode, body)
		}
	}
	var teams []struct{ Name string }
	if c.json(&teams, "admin", "list", "teams"); len(teams) != 1 || teams[0].Name != "local" {
		t.Errorf("teams after two dev runs = %+v, want just local", teams)
	}
}
