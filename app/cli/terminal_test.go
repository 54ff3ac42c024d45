package cli_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// Names stored before they were checked (or written around the store) reach
// the operator's terminal escaped: no ESC sequence, C1 control or bidi
// override is printed raw, and --json still decodes to what is stored.
func TestListEscapesStoredNames(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	id := keyID(c.issue("--team", "acme", "--member", "ada@acme.test", "--name", "laptop"))
	const hostileName = "\x1b]0;owned\x07\x1b[2J\u009bred\u202e"
	const hostileEmail = "ada\u202emoc.evil@acme.test"
	pool := dbtest.Pool(t, c.vars["DATABASE_URL"])
	if _, err := pool.Exec(t.Context(), "UPDATE api_key SET name = $1 WHERE id = $2", hostileName, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "UPDATE member SET email = $1", hostileEmail); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"admin", "list", "keys", "--team", "acme"}, {"admin", "list", "members", "--team", "acme"},
		{"admin", "issue-key", "--team", "acme", "--member", hostileEmail}} {
		out := c.ok(args...)
		if i := strings.IndexFunc(out, func(r rune) bool { return r == 0x1b || r == 0x07 || r == 0x9b || r == 0x202e }); i >= 0 {
			t.Errorf("tollgate %s printed a raw control at byte %d: %q", strings.Join(args, " "), i, out)
		}
	}
	wantOutput(t, "list keys", c.ok("admin", "list", "keys", "--team", "acme"), `\u001b]0;owned\u0007\u001b[2J\u009bred\u202e`)
	wantOutput(t, "list members", c.ok("admin", "list", "members", "--team", "acme"), `ada\u202emoc.evil@acme.test`)

	var keys []store.Key
	c.json(&keys, "admin", "list", "keys", "--team", "acme")
	if len(keys) == 0 || keys[0].ID != id || keys[0].Name != hostileName {
		t.Errorf("list keys --json = %+v, want key %s with the stored name %q", keys, id, hostileName)
	}
}
