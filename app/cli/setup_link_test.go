package cli_test

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

var setupURL = regexp.MustCompile(`https://gw\.example/console/setup/([A-Za-z0-9_-]{43})\n`)

// TestSetupLink: `admin setup-link` prints a working one-time link, and `serve`
// prints one by itself only while the gateway has no owner. Once it has one,
// the link serve printed is refused, `admin setup-link` fails saying how to
// make a further team, and `admin invite` makes that team's owner's link.
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

	printed := setupURL.FindStringSubmatch(serveOnce(t, c))
	if printed == nil {
		t.Fatal("serve on a database without an owner printed no setup link")
	}
	if _, err := st.CompleteSetup(t.Context(), m[1], "acme", "owner@acme.test", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if out := serveOnce(t, c); setupURL.MatchString(out) {
		t.Fatalf("serve printed a setup link although the gateway has an owner:\n%s", out)
	}
	if _, err := st.CompleteSetup(t.Context(), printed[1], "late", "late@late.test", "correct horse battery"); !errors.Is(err, store.ErrSetupDone) {
		t.Errorf("the link serve printed before the owner: %v, want ErrSetupDone", err)
	}
	out, err := c.run("admin", "setup-link")
	if err == nil || setupURL.MatchString(out) || !strings.Contains(err.Error(), "tollgate admin invite") || strings.Contains(err.Error(), "\n") {
		t.Errorf("admin setup-link with an owner: %q, %v; want one line naming admin invite", out, err)
	}

	c.ok("admin", "create-team", "--name", "beta")
	invite := regexp.MustCompile(`https://gw\.example/console/invite/([A-Za-z0-9_-]{43})\n`).FindStringSubmatch(
		c.ok("admin", "invite", "--team", "beta", "--email", "boss@beta.test", "--role", "owner"))
	if invite == nil {
		t.Fatal("admin invite printed no link")
	}
	if m, err := st.AcceptInvite(t.Context(), invite[1], "correct horse battery"); err != nil || m.Role != store.RoleOwner {
		t.Errorf("the printed invite: %+v, %v; want beta's owner", m, err)
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
