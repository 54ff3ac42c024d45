package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
)

// TestRedisDownAtStartSaysSoOnceThenBack: make run with REDIS_URL at a port
// nothing listens on prints what to do instead of "Try it"; seconds of
// requests refused meanwhile log Redis down once (and no raw go-redis line);
// a Redis started there is logged back once, and calls then pass.
func TestRedisDownAtStartSaysSoOnceThenBack(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	port := freePort(t)
	c.vars["REDIS_URL"] = "redis://127.0.0.1:" + port + "/0"
	run := runDev(t, c, "127.0.0.1:0")
	defer run.stop()
	if strings.Contains(strings.ToLower(run.banner), "try it") || !strings.Contains(run.banner, "Calls get 503 until Redis answers: start Redis at 127.0.0.1:"+port) {
		t.Errorf("banner with Redis down:\n%s\nwant no \"Try it\", and what to do about Redis", run.banner)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if resp, body := message(t, run.url, run.key); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("call with Redis down: %d %s, want 503", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := countLogs(t, run.logs.String(), "dependency down"); n != 1 {
		t.Errorf("%d \"dependency down\" lines over 3s of failing calls, want 1:\n%s", n, run.logs.String())
	}

	redis := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { redis.Process.Kill(); redis.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for countLogs(t, run.logs.String(), "dependency back") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no \"dependency back\" line within 15s of Redis starting:\n%s", run.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp, body := message(t, run.url, run.key); resp.StatusCode != http.StatusOK {
		t.Errorf("call with Redis back: %d %s, want 200", resp.StatusCode, body)
	}
	logs := run.logs.String()
	if down, back := countLogs(t, logs, "dependency down"), countLogs(t, logs, "dependency back"); down != 1 || back != 1 {
		t.Errorf("%d down and %d back lines, want one each:\n%s", down, back, logs)
	}
	// Stopped while Redis answers: the default tier's budget leaves a settle to
	// drain, which with Redis gone would take SHUTDOWN_TIMEOUT.
	run.stop()
}

// countLogs counts the log lines with message msg, failing on a line that is
// not JSON (go-redis's own logger writes plain text).
func countLogs(t *testing.T, logs, msg string) int {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if rec.Msg == msg {
			n++
		}
	}
	return n
}

// TestPostgresDownAtStartIsOneClearLine: serve with DATABASE_URL at a port
// nothing listens on fails with one line naming the address, how to start
// Postgres and the variable to set.
func TestPostgresDownAtStartIsOneClearLine(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	vars := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:" + port + "/tollgate?sslmode=disable", "ADMIN_ADDR": "off"}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := cli.Run(ctx, []string{"serve"}, cli.Env{Getenv: func(n string) string { return vars[n] }, Stdout: &stdout, Stderr: &stderr})
	if err == nil {
		t.Fatal("serve with Postgres down returned nil, want an error (non-zero exit)")
	}
	msg := err.Error()
	for _, want := range []string{"Postgres is not answering at 127.0.0.1:" + port, "start it (", "DATABASE_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q is more than one line", msg)
	}
}
