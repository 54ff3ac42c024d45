package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

var plaintextToken = regexp.MustCompile(`tga_[a-z2-7]{13}_[a-z2-7]{52}`)

func TestAdminTokenCommands(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")

	out := c.ok("admin", "token", "create", "--team", "acme", "--name", "ci-deploy", "--role", "read")
	tokens := plaintextToken.FindAllString(out, -1)
	if len(tokens) != 1 {
		t.Fatalf("token create printed %q, want exactly one token", out)
	}
	id := strings.Split(tokens[0], "_")[1]
	var listed []store.AdminToken
	c.json(&listed, "admin", "token", "list", "--team", "acme")
	if len(listed) != 1 || listed[0].ID != id || listed[0].Name != "ci-deploy" || listed[0].Role != store.TokenRoleRead {
		t.Fatalf("token list = %+v, want the read token %s", listed, id)
	}
	if list := c.ok("admin", "token", "list", "--team", "acme"); strings.Contains(list, tokens[0][len(tokens[0])-52:]) {
		t.Fatalf("token list shows the secret: %q", list)
	}
	var deployment store.IssuedAdminToken
	c.json(&deployment, "admin", "token", "create", "--deployment", "--name", "prices")
	if deployment.TeamID != nil || !strings.HasPrefix(deployment.Plaintext, "tga_") {
		t.Fatalf("deployment token = %+v", deployment)
	}
	wantOutput(t, "token revoke", c.ok("admin", "token", "revoke", "--id", id), "revoked admin token "+id)
	c.json(&listed, "admin", "token", "list", "--team", "acme")
	if listed[0].RevokedAt == nil {
		t.Errorf("revoked token listed as %+v", listed[0])
	}
	for _, args := range [][]string{
		{"admin", "token", "revoke", "--id", id},                                            // already revoked
		{"admin", "token", "revoke", "--id", "nosuchtoken"},                                 // unknown
		{"admin", "token", "create", "--name", "x"},                                         // neither team nor deployment
		{"admin", "token", "create", "--team", "acme", "--deployment", "--name", "x"},       // both
		{"admin", "token", "create", "--team", "acme", "--name", "x", "--role", "admin"},    // bad role
		{"admin", "token", "create", "--team", "acme", "--name", "x", "--expires", "9000h"}, // past a year
		{"admin", "token", "frobnicate"},
	} {
		if _, err := c.run(args...); err == nil {
			t.Errorf("tollgate %s succeeded", strings.Join(args, " "))
		}
	}
}
