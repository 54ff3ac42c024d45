package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/app/api"
	"github.com/tollgate/tollgate/app/store"
)

// A key issued through one replica works on that replica as soon as the
// answer arrives, and a route added there is served there at once: neither
// waits for the replica's own NOTIFY (the poll is an hour here).
func TestAChangeAnsweredHereIsServedHereAtOnce(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(&recorder{})
	t.Cleanup(upstream.Close)
	e := newEnv(t, map[string]string{"CONFIG_POLL_INTERVAL": "1h", "TOLLGATE_CREDENTIAL_UP": "up-secret"})
	team := e.team("acme")
	token := e.token(&team.ID, store.TokenRoleOwner)
	member, err := e.st.AddMember(context.Background(), store.ActorCLI, team.ID, "ada@acme.test", store.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		prefix := "/up" + strconv.Itoa(i)
		if r := e.call(token, http.MethodPost, api.Prefix+"/routes", map[string]string{"prefix": prefix, "upstream_url": upstream.URL,
			"dialect": "generic", "credential_header": "x-up", "credential_env": "TOLLGATE_CREDENTIAL_UP"}); r.status != http.StatusCreated {
			t.Fatalf("add route: %d %s", r.status, r.body)
		}
		r := e.call(token, http.MethodPost, api.Prefix+"/members/"+strconv.FormatInt(member.ID, 10)+"/keys", map[string]string{"name": "k" + strconv.Itoa(i)})
		var key store.IssuedKey
		if err := json.Unmarshal(r.body, &key); err != nil || r.status != http.StatusCreated {
			t.Fatalf("issue key: %d %s", r.status, r.body)
		}
		req, _ := http.NewRequest(http.MethodGet, e.url+prefix+"/anything", nil)
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: the new key on its new route, on the replica that made both: %d %s", i, resp.StatusCode, body)
		}
	}
}
