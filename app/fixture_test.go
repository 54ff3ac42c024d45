package app_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// Recognisable provider credentials: a test searches every output for them.
const (
	anthropicSecret = "sk-ant-PLANTED-anthropic-credential-7f3a9c"
	openaiSecret    = "sk-PLANTED-openai-credential-19cd04"
)

// fixture is a team with a member, a key and both preset routes pointing at a
// mock provider, served by one gateway replica on the test's own schema.
type fixture struct {
	dbURL       string
	redisPrefix string
	st          *store.Store
	mock        *mock.Server
	mockURL     string
	team        store.Team
	member      store.Member
	key         string // plaintext
	keyID       string
	gw          *apptest.Replica
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{dbURL: dbtest.Schema(t), redisPrefix: redistest.Prefix(t)}
	f.st = store.New(dbtest.Pool(t, f.dbURL)).WithOutbound(apptest.Outbound()).WithGrants(apptest.Grants(map[string]string{"TOLLGATE_CREDENTIAL_SECOND": ""}))
	// OutputTokens above every max_tokens the tests send, so the request caps the length.
	f.mock = mock.New(mock.Options{AnthropicKey: anthropicSecret, OpenAIKey: openaiSecret, OutputTokens: 100})
	upstream := httptest.NewServer(f.mock)
	t.Cleanup(upstream.Close)
	f.mockURL = upstream.URL

	var err error
	f.team, err = f.st.CreateTeam(ctx, store.ActorCLI, "acme")
	must(t, err)
	// Each test sets the limits it is about: no default tier, no team budget
	// (TestNewTeamDefaultsBindAtTheGateway tests those).
	must(t, f.st.SetDefaultTier(ctx, store.ActorCLI, f.team.ID, store.TierNone))
	_, err = f.st.SetTeamLimits(ctx, store.ActorCLI, f.team.ID, store.NoLimits())
	must(t, err)
	f.member, err = f.st.AddMember(ctx, store.ActorCLI, f.team.ID, "ada@acme.test", store.RoleMember)
	must(t, err)
	for _, preset := range []string{"anthropic", "openai"} {
		_, err = f.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: f.team.ID, Preset: preset, UpstreamURL: f.mockURL})
		must(t, err)
	}
	k, err := f.st.IssueKey(ctx, store.ActorCLI, f.team.ID, f.member.ID, "laptop")
	must(t, err)
	f.key, f.keyID = k.Plaintext, k.ID
	f.gw = f.replica(t)
	return f
}

// replica starts another gateway on the fixture's database and Redis prefix. The
// poll interval is long so that only LISTEN/NOTIFY can explain a fast reload.
func (f *fixture) replica(t testing.TB) *apptest.Replica {
	return f.replicaWith(t, nil)
}

// replicaWith is replica with more configuration variables.
func (f *fixture) replicaWith(t testing.TB, extra map[string]string, opts ...app.Option) *apptest.Replica {
	env := map[string]string{
		"ANTHROPIC_API_KEY":    anthropicSecret,
		"OPENAI_API_KEY":       openaiSecret,
		"CONFIG_POLL_INTERVAL": "10m",
		"REDIS_URL":            "redis://127.0.0.1:6379/0",
		"REDIS_KEY_PREFIX":     f.redisPrefix,
		// -race on two shared cores can stall a Redis call past the 150ms default;
		// the bound itself is tested in TestRedisDown.
		"REDIS_TIMEOUT": "2s",
	}
	maps.Copy(env, extra)
	return apptest.Start(t, f.dbURL, env, opts...)
}

// anthropicRequest builds a Messages call the way the Anthropic SDK sends it.
func anthropicRequest(t *testing.T, baseURL, key, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+"/anthropic/v1/messages", strings.NewReader(body))
	must(t, err)
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	return req
}

const messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":32,"messages":[{"role":"user","content":"Hello there"}]}`

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	r, err := send(req)
	must(t, err)
	return r
}

// send is do for a response that may end early (a cut stream): it returns what
// arrived and the read error.
func send(req *http.Request) (response, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
