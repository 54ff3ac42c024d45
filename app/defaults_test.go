package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestNewTeamDefaultsBindAtTheGateway: a team made by the setup link and one
// made by CreateTeam (the API's, the CLI's and the console's way) are limited
// from the first request: their owner, a member added and a member invited
// then accepted are each admitted up to the default tier's 60 requests a
// minute and refused with 429 past it, through a real gateway.
func TestNewTeamDefaultsBindAtTheGateway(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	link, _, err := f.st.CreateSetupLink(ctx, store.ActorCLI)
	must(t, err)
	owner, err := f.st.CompleteSetup(ctx, link, "setup-team", "owner@setup.test", "a long enough password")
	must(t, err)
	made, err := f.st.CreateTeam(ctx, store.ActorCLI, "made-team")
	must(t, err)
	added, err := f.st.AddMember(ctx, store.ActorCLI, made.ID, "added@made.test", store.RoleMember)
	must(t, err)
	token, _, err := f.st.CreateInvite(ctx, store.ActorCLI, made.ID, "invited@made.test", store.RoleMember)
	must(t, err)
	invited, err := f.st.AcceptInvite(ctx, token, "a long enough password")
	must(t, err)

	for i, m := range []store.Member{owner, added, invited} {
		prefix := "/limited" + string(rune('a'+i))
		_, err := f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: m.TeamID, Preset: "anthropic", Prefix: prefix, UpstreamURL: f.mockURL})
		must(t, err)
		k, err := f.st.IssueKey(ctx, store.ActorCLI, m.TeamID, m.ID, "laptop")
		must(t, err)
		eventually(t, 5*time.Second, m.Email+" in the snapshot", func() bool {
			snap := f.gw.App.Snapshots.Current()
			sm, ok := snap.Member(m.ID)
			_, keyOK := snap.Key(k.ID)
			return ok && keyOK && sm.Limits.Rate != nil
		})
		call := func() int {
			req := anthropicRequest(t, f.gw.URL, k.Plaintext, messagesBody)
			req.URL.Path = strings.Replace(req.URL.Path, "/anthropic", prefix, 1)
			return do(t, req).status
		}
		// The token bucket holds 60 and refills one a second: the first 60 pass,
		// and a 429 comes within the few refilled while they ran.
		for n := 1; n <= 60; n++ {
			if s := call(); s != http.StatusOK {
				t.Fatalf("%s: request %d under the default 60 a minute: %d", m.Email, n, s)
			}
		}
		refused := false
		for n := 61; n <= 70 && !refused; n++ {
			refused = call() == http.StatusTooManyRequests
		}
		if !refused {
			t.Errorf("%s: no 429 within 70 requests at the default 60 a minute", m.Email)
		}
	}
}
