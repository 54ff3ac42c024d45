package console

import (
	"context"
	"encoding/json"

	"github.com/tollgate/tollgate/app/store"
)

// One-time results of a form posted without HTMX. The handler stores what the
// next page must show in the session and redirects (POST-redirect-GET), so a
// reload neither repeats the action nor meets a 405; the GET that follows
// takes it out of the session, so it is shown exactly once.
const (
	flashNewKey = "flash_new_key" // a key just issued, with its plaintext
	flashInvite = "flash_invite"  // an invite link just made
)

// putFlash keeps v for the next page under name.
func (c *Console) putFlash(ctx context.Context, name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the console's own plain structs get here
	}
	c.sessions.Put(ctx, name, string(b))
}

// popFlash takes what putFlash kept under name into v, reporting whether there
// was any.
func (c *Console) popFlash(ctx context.Context, name string, v any) bool {
	s := c.sessions.PopString(ctx, name)
	return s != "" && json.Unmarshal([]byte(s), v) == nil
}

// popNewKeyOf takes the key the previous request issued, if it is member
// memberID's: a key issued for one page is never shown on another.
func (c *Console) popNewKeyOf(ctx context.Context, memberID int64) *store.IssuedKey {
	var k store.IssuedKey
	if !c.popFlash(ctx, flashNewKey, &k) || k.MemberID != memberID {
		return nil
	}
	return &k
}
