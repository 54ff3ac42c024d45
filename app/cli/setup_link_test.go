package cli_test

import (
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

var setupURL = regexp.MustCompile(`https://gw\.example/console/setup/([A-Za-z0-9_-]{43})\n`)

// TestSetupLink: `admin setup-link` prints a working one-time link, and `serve`
// prints one by itself only while nobody can sign in to the console.
func TestSetupLink(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.vars["PUBLIC_URL"] = "https://gw.example"
	m := setupURL.FindStringSubmatch(c.ok("admin", "setup-link"))
	if m == nil {
		t.Fatal("admin setup-link printed no link")
	}
	st := store.New(dbtest.Pool(t, c.vars["DATABASE_URL"]))
	if inv, err := st.PendingInvite(t.Context(), m[1]); err != nil || inv.TeamID != nil {
		t.Fatalf("printed token: %+v, %v; want a pending setup link", inv, err)
	}

	if out := serveOnce(t, c); !setupURL.MatchString(out) {
		t.Fatalf("serve on a database where nobody can sign in printed no setup link:\n%s", out)
	}
	if _, err := st.CompleteSetup(t.Context(), m[1], "acme", "owner@acme.test", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if out := serveOnce(t, c); setupURL.MatchString(out) {
		t.Fatalf("serve printed a setup link although an owner can sign in:\n%s", out)
	}
}

// serveOnce starts `serve`, waits until it listens, stops it and returns its stdout.
func serveOnce(t *testing.T, c *tool) string {
	t.Helper()
	var stdout, stderr syncBuffer
	env := c.env(&stdout, &stderr)
	env.Listen = func(string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	ready := make(chan struct{})
	env.Ready = func(string) { close(ready) }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"serve"}, env) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	return stdout.String()
}
