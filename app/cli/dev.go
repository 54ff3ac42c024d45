package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
)

// mockCredentialEnv names the credential the dev gateway injects towards the
// built-in mock provider; the mock insists on it, so injection is exercised.
const mockCredentialEnv = "TOLLGATE_CREDENTIAL_MOCK"

// dev is `make run`: the gateway plus a local team ready for an SDK call. Without
// ANTHROPIC_API_KEY / OPENAI_API_KEY the routes point at a built-in mock
// provider, so a newcomer gets a working call with no account at all.
func dev(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("dev")
	teamName := fs.String("team", "local", "team to set up")
	email := fs.String("email", "owner@localhost.localdomain", "the local owner's email")
	mockAddr := fs.String("mock-addr", "127.0.0.1:9999", "where the mock provider listens")
	mockURL := fs.String("mock-url", "", "use a mock provider already running there (docker compose), with the key in $"+mockCredentialEnv+", instead of starting one")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mockURL != "" && env.Getenv(mockCredentialEnv) == "" {
		return usagef("dev: --mock-url needs %s, the key that mock provider expects", mockCredentialEnv)
	}
	env.Getenv = withoutDrainDelay(withLocalRedis(env.Getenv))
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)

	getenv := env.Getenv
	upstreams := map[string]string{"anthropic": "", "openai": ""} // "" = the real provider
	credentialEnvs := map[string]string{}
	if getenv("ANTHROPIC_API_KEY") == "" || getenv("OPENAI_API_KEY") == "" {
		upstream := *mockURL
		if upstream == "" {
			mockKey := randomToken()
			url, stop, err := startMock(*mockAddr, mockKey)
			if err != nil {
				return err
			}
			defer stop()
			upstream = url
			getenv = func(name string) string {
				if name == mockCredentialEnv {
					return mockKey
				}
				return env.Getenv(name)
			}
		}
		for preset, envName := range map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"} {
			if getenv(envName) == "" {
				upstreams[preset] = upstream
				credentialEnvs[preset] = mockCredentialEnv
			}
		}
	}

	a, err := app.New(ctx, cfg, getenv, log)
	if err != nil {
		return err
	}
	defer a.Close()
	plaintext, err := setUpLocalTeam(ctx, a.Store, *teamName, *email, upstreams, credentialEnvs)
	if err != nil {
		return err
	}
	signIn, err := ownerSignInLink(ctx, a.Store, *teamName, *email, cfg.PublicURL)
	if err != nil {
		return err
	}
	if err := a.Snapshots.Reload(ctx); err != nil {
		return err
	}
	ready := env.Ready
	env.Ready = func(publicURL string) {
		printNextSteps(env, cfg.PublicURL, *teamName, *email, plaintext, signIn, upstreams)
		if ready != nil {
			ready(publicURL)
		}
	}
	return listenAndServe(ctx, a, cfg, env, log, false)
}

// withoutDrainDelay makes Ctrl-C stop make run at once: no load balancer
// watches a local gateway's /readyz. DRAIN_DELAY, when set, still wins.
func withoutDrainDelay(getenv func(string) string) func(string) string {
	return func(name string) string {
		if v := getenv(name); v != "" || name != "DRAIN_DELAY" {
			return v
		}
		return "0s"
	}
}

// setUpLocalTeam creates the team and its owner on the first run, points the two
// preset routes at this run's upstreams (the mock's address or the real
// providers may differ from the last run), and issues a fresh key on every run
// (the previous one was printed once and may be lost).
func setUpLocalTeam(ctx context.Context, st *store.Store, teamName, email string, upstreams, credentialEnvs map[string]string) (string, error) {
	team, err := st.FindTeam(ctx, teamName)
	if errors.Is(err, store.ErrNotFound) {
		team, err = st.CreateTeam(ctx, store.ActorCLI, teamName)
		if err == nil {
			_, err = st.AddMember(ctx, store.ActorCLI, team.ID, email, store.RoleOwner)
		}
	}
	if err != nil {
		return "", err
	}
	routes, err := st.Routes(ctx, team.ID)
	if err != nil {
		return "", err
	}
	for _, preset := range []string{"anthropic", "openai"} {
		spec := store.RouteSpec{TeamID: team.ID, Preset: preset, UpstreamURL: upstreams[preset], CredentialEnv: credentialEnvs[preset]}
		if err := syncRoute(ctx, st, routes, spec); err != nil {
			return "", err
		}
	}
	owner, err := st.FindMember(ctx, team.ID, email)
	if err != nil {
		return "", fmt.Errorf("the %s team has no member %s: %w", teamName, email, err)
	}
	k, err := st.IssueKey(ctx, store.ActorCLI, team.ID, owner.ID, "make run "+time.Now().UTC().Format(time.DateTime))
	if err != nil {
		return "", err
	}
	return k.Plaintext, nil
}

// syncRoute adds the preset's route, or updates the existing one when this run's
// upstream or credential differs.
func syncRoute(ctx context.Context, st *store.Store, existing []store.Route, spec store.RouteSpec) error {
	prefix := store.Presets[spec.Preset].Prefix
	for _, r := range existing {
		if r.Prefix != prefix {
			continue
		}
		want := cmp.Or(spec.UpstreamURL, store.Presets[spec.Preset].UpstreamURL)
		wantEnv := cmp.Or(spec.CredentialEnv, store.Presets[spec.Preset].CredentialEnv)
		if r.UpstreamURL == want && r.CredentialEnv == wantEnv {
			return nil
		}
		_, err := st.UpdateRoute(ctx, store.ActorCLI, r.ID, spec)
		return err
	}
	_, err := st.AddRoute(ctx, store.ActorCLI, spec)
	return err
}

// localRedis is where make run looks for Redis when REDIS_URL is not set.
const localRedis = "127.0.0.1:6379"

// withLocalRedis uses a Redis answering on localRedis when REDIS_URL is unset,
// so make run exercises the same admission path as a deployment; without one the
// gateway falls back to its in-process limiter and says so.
func withLocalRedis(getenv func(string) string) func(string) string {
	if getenv("REDIS_URL") != "" {
		return getenv
	}
	conn, err := net.DialTimeout("tcp", localRedis, 300*time.Millisecond)
	if err != nil {
		return getenv
	}
	conn.Close()
	return func(name string) string {
		if name == "REDIS_URL" {
			return "redis://" + localRedis + "/0"
		}
		return getenv(name)
	}
}

// ownerSignInLink is how the local owner gets into the console: a one-time
// owner invite that sets their password, while nobody has one yet; afterwards
// the plain sign-in page.
func ownerSignInLink(ctx context.Context, st *store.Store, teamName, email, publicURL string) (string, error) {
	anyone, err := st.AnyCanSignIn(ctx)
	if err != nil || anyone {
		return publicURL + "/console/", err
	}
	team, err := st.FindTeam(ctx, teamName)
	if err != nil {
		return "", err
	}
	token, _, err := st.CreateInvite(ctx, store.ActorCLI, team.ID, email, store.RoleOwner)
	if err != nil {
		return "", err
	}
	return console.InviteURL(publicURL, token), nil
}

func startMock(addr, key string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("start the mock provider on %s (is another make run going?): %w", addr, err)
	}
	srv := &http.Server{Handler: mock.New(mock.Options{AnthropicKey: key, OpenAIKey: key, EventInterval: 20 * time.Millisecond}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func printNextSteps(env Env, publicURL, team, email, key, signIn string, upstreams map[string]string) {
	upstream := "the real Anthropic and OpenAI APIs"
	if upstreams["anthropic"] != "" || upstreams["openai"] != "" {
		upstream = "a built-in mock provider (set ANTHROPIC_API_KEY / OPENAI_API_KEY before the first make run to use the real ones)"
	}
	fmt.Fprintf(env.Stdout, `
tollgate is running at %[1]s for team %[2]q, forwarding to %[3]s.

Your key for %[4]s (shown once; every make run issues a new one):
  export TOLLGATE_KEY=%[5]s

Try it:
  curl -s %[1]s/anthropic/v1/messages -H "x-api-key: $TOLLGATE_KEY" -H "anthropic-version: 2023-06-01" \
    -H "content-type: application/json" \
    -d '{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}'

Or from an SDK, changing nothing but the base URL and key:
  anthropic.Anthropic(base_url="%[1]s/anthropic", api_key=os.environ["TOLLGATE_KEY"])
  OpenAI(base_url="%[1]s/openai/v1", api_key=os.environ["TOLLGATE_KEY"])

The console, to invite teammates, hand out keys and cut off a runaway loop:
  %[6]s

Or from the command line:
  go run ./cmd/tollgate admin add-member --team %[2]s --email alice@example.com
  go run ./cmd/tollgate admin issue-key --team %[2]s --member alice@example.com
Press Ctrl-C to stop.
`, publicURL, team, upstream, email, key, signIn)
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}
