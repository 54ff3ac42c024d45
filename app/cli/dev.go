package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
)

// mockCredentialEnv names the credential the dev gateway injects towards the
// built-in mock provider; the mock insists on it, so injection is exercised.
const mockCredentialEnv = "TOLLGATE_CREDENTIAL_MOCK"

// devMockKey is that credential for the built-in mock. It is the same in every
// run, not random, so a second make run on the same database can forward to an
// earlier run's mock that still answers rather than re-point the shared routes
// at its own (which broke the earlier run); the mock serves canned text on
// loopback, so this key guards nothing worth a secret.
const devMockKey = "tollgate-dev-mock"

// exampleModel is the model the banner's example call names: a current one
// the seeded prices cover (migrations/0003_prices.sql).
const exampleModel = "claude-sonnet-4-6"

// devKeyName starts the name of every key make run issues.
const devKeyName = "make run "

// providerKeyEnv is, per preset, the variable that sends it to the real provider.
var providerKeyEnv = map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

// devPresets in the banner's order.
var devPresets = []string{"anthropic", "openai"}

// devRoute is where this run sends one preset, for the banner.
type devRoute struct {
	preset   string
	upstream string // "" = the real provider
	// borrowed: the mock of another make run, still answering, left as it was.
	borrowed bool
}

// dev is `make run`: the gateway plus a local team ready for an SDK call. A
// preset whose provider key (ANTHROPIC_API_KEY / OPENAI_API_KEY) is unset points
// at a built-in mock provider, so a newcomer gets a working call with no account.
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
	env.Getenv = withMockGrant(withoutDrainDelay(withLocalRedis(env.Getenv)), *mockURL)
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	mockHost, _, _ := net.SplitHostPort(*mockAddr)
	if *mockURL != "" {
		if u, err := url.Parse(*mockURL); err == nil {
			mockHost = u.Hostname()
		}
	}
	allowMock(ctx, &cfg, mockHost, log)
	getenv := env.Getenv
	if *mockURL == "" {
		getenv = func(name string) string {
			if name == mockCredentialEnv {
				return devMockKey
			}
			return env.Getenv(name)
		}
	}

	a, err := app.New(ctx, cfg, getenv, log)
	if err != nil {
		return postgresUnreachable(err, cfg)
	}
	defer a.Close()
	team, err := localTeam(ctx, a.Store, *teamName, *email)
	if err != nil {
		return err
	}
	routes, err := a.Store.Routes(ctx, team.ID)
	if err != nil {
		return err
	}
	ownMock := func() (string, error) { return *mockURL, nil }
	var url string // this run's own mock, once started
	if *mockURL == "" {
		// Started once, and only if a preset needs it; stopped after the gateway drained.
		stopMock := func() {}
		defer func() { stopMock() }()
		ownMock = func() (string, error) {
			if url != "" {
				return url, nil
			}
			u, stop, err := startMock(*mockAddr, devMockKey)
			if err != nil {
				return "", err
			}
			url, stopMock = u, stop
			return url, nil
		}
	}
	var plan []devRoute
	mockClient := a.Outbound().Client(500 * time.Millisecond)
	for _, preset := range devPresets {
		r, err := planRoute(ctx, mockClient, preset, routes, getenv(providerKeyEnv[preset]) != "", *mockURL == "", ownMock, func() string { return url })
		if err != nil {
			return err
		}
		spec := store.RouteSpec{TeamID: team.ID, Preset: preset, UpstreamURL: r.upstream}
		if r.upstream != "" {
			spec.CredentialEnv = mockCredentialEnv
		}
		if err := syncRoute(ctx, a.Store, routes, spec); err != nil {
			return err
		}
		plan = append(plan, r)
	}
	plaintext, earlier, err := issueDevKey(ctx, a.Store, team.ID, *email)
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
		redisDown := ""
		if a.RedisDown() {
			redisDown = app.RedisDownHint(redisAddr(cfg.RedisURL))
		}
		printNextSteps(env, cfg.PublicURL, *teamName, *email, plaintext, signIn, plan, earlier, redisDown)
		if ready != nil {
			ready(publicURL)
		}
	}
	return listenAndServe(ctx, a, cfg, env, log, false)
}

// planRoute decides where a preset goes on this run: the real provider when its
// key is set; else the mock the route already points at if that mock still
// answers through client, the gateway's outbound guard (another make run's:
// re-pointing the shared route would break that run); else this run's own mock.
//
// ownURL is this run's mock's URL, "" until ownMock started it.
func planRoute(ctx context.Context, client *http.Client, preset string, routes []store.Route, realKey, builtInMock bool,
	ownMock func() (string, error), ownURL func() string) (devRoute, error) {
	if realKey {
		return devRoute{preset: preset}, nil
	}
	if builtInMock {
		prefix := store.Presets[preset].Prefix
		for _, r := range routes {
			// The mock this run started for an earlier preset answers too, but
			// it is no other instance's.
			if r.Prefix == prefix && r.CredentialEnv == mockCredentialEnv && r.UpstreamURL != ownURL() && mockAnswers(ctx, client, r.UpstreamURL) {
				return devRoute{preset: preset, upstream: r.UpstreamURL, borrowed: true}, nil
			}
		}
	}
	url, err := ownMock()
	return devRoute{preset: preset, upstream: url}, err
}

// mockAnswers says whether a built-in mock with devMockKey serves at url.
func mockAnswers(ctx context.Context, client *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/v1/models", nil)
	if err != nil {
		return false
	}
	req.Header.Set("x-api-key", devMockKey)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// allowMock adds the mock provider's addresses to OUTBOUND_ALLOW: it listens
// on loopback (under docker compose, a private address), which the gateway
// otherwise refuses to call.
func allowMock(ctx context.Context, cfg *config.Config, host string, log *slog.Logger) {
	if host == "" {
		return
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		log.Warn("the mock provider's host does not resolve; the gateway may refuse to call it", "host", host, "err", err)
		return
	}
	for _, a := range addrs {
		a = a.Unmap()
		cfg.OutboundAllow = append(cfg.OutboundAllow, netip.PrefixFrom(a, a.BitLen()))
	}
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

// localTeam finds the team, or creates it and its owner on the first run.
func localTeam(ctx context.Context, st *store.Store, teamName, email string) (store.Team, error) {
	team, err := st.FindTeam(ctx, teamName)
	if errors.Is(err, store.ErrNotFound) {
		team, err = st.CreateTeam(ctx, store.ActorCLI, teamName)
		if err == nil {
			_, err = st.AddMember(ctx, store.ActorCLI, team.ID, email, store.RoleOwner)
		}
	}
	return team, err
}

// issueDevKey issues this run's key: the last run's plaintext was printed once
// and may be lost. It revokes none: an earlier run may still be serving, and
// its newcomer still calling with the key it printed. It returns how many keys
// earlier runs issued the owner that still work.
func issueDevKey(ctx context.Context, st *store.Store, teamID int64, email string) (string, int, error) {
	owner, err := st.FindMember(ctx, teamID, email)
	if err != nil {
		return "", 0, fmt.Errorf("the local team has no member %s: %w", email, err)
	}
	keys, err := st.Keys(ctx, teamID)
	if err != nil {
		return "", 0, err
	}
	earlier := 0
	now := time.Now()
	for _, k := range keys {
		if state := k.State(now); k.MemberID == owner.ID && strings.HasPrefix(k.Name, devKeyName) && (state == "active" || state == "grace") {
			earlier++
		}
	}
	k, err := st.IssueKey(ctx, store.ActorCLI, teamID, owner.ID, devKeyName+now.UTC().Format(time.DateTime))
	if err != nil {
		return "", 0, err
	}
	return k.Plaintext, earlier, nil
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

// withMockGrant grants the mock provider's credential to the hosts a mock
// runs on (loopback, or the host of --mock-url), beside whatever
// CREDENTIAL_GRANTS the developer set: the dev routes carry it there.
func withMockGrant(getenv func(string) string, mockURL string) func(string) string {
	hosts := "127.0.0.1,localhost,[::1]"
	if u, err := url.Parse(mockURL); err == nil && u.Hostname() != "" {
		hosts = u.Host
	}
	return func(name string) string {
		v := getenv(name)
		if name != "CREDENTIAL_GRANTS" || strings.Contains(v, mockCredentialEnv+":") {
			return v
		}
		return strings.TrimSpace(v + "\n" + mockCredentialEnv + ": hosts=" + hosts)
	}
}

// ownerSignInLink is how the local owner gets into the console, on every run:
// while they have no password, a fresh one-time owner invite that sets it
// (earlier runs' links keep working until used or expired); once they have
// one, the sign-in page, to sign in as them. Whether anyone else on the
// gateway has a password says nothing about this owner.
func ownerSignInLink(ctx context.Context, st *store.Store, teamName, email, publicURL string) (string, error) {
	team, err := st.FindTeam(ctx, teamName)
	if err != nil {
		return "", err
	}
	token, _, err := st.CreateInvite(ctx, store.ActorCLI, team.ID, email, store.RoleOwner)
	if _, ok := errors.AsType[*store.ValidationError](err); ok {
		// They already have an account: CreateInvite refuses to replace a password.
		return fmt.Sprintf("%s/console/ (sign in as %s with the password you set)", publicURL, email), nil
	}
	if err != nil {
		return "", err
	}
	return console.InviteURL(publicURL, token) + " (one-time: sets " + email + "'s password)", nil
}

func startMock(addr, key string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("start the mock provider on %s (pick another with make run RUN_ARGS=\"--mock-addr 127.0.0.1:9998\"): %w", addr, err)
	}
	srv := &http.Server{Handler: mock.New(mock.Options{AnthropicKey: key, OpenAIKey: key, EventInterval: 20 * time.Millisecond}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// describeRoute says where a preset's route sends calls, and whether they cost money.
func describeRoute(r devRoute) string {
	switch {
	case r.upstream == "":
		return fmt.Sprintf("%s with $%s: the real provider, calls are billed to that account",
			store.Presets[r.preset].UpstreamURL, providerKeyEnv[r.preset])
	case r.borrowed:
		return fmt.Sprintf("%s, the mock of another make run that is still going (left as it was, so that run keeps working; nothing billed; once it stops, restart this one)", r.upstream)
	}
	return fmt.Sprintf("%s, the built-in mock provider (canned replies; nothing billed; set $%s to use the real one)",
		r.upstream, providerKeyEnv[r.preset])
}

// redisAddr is REDIS_URL's first address, for a message.
func redisAddr(redisURL string) string {
	if e, err := config.ParseRedisURL(redisURL); err == nil && len(e.Addrs) > 0 {
		return e.Addrs[0]
	}
	return "REDIS_URL"
}

// printNextSteps prints the banner; redisDown, when set, is what to do about a
// Redis that does not answer, in place of the invitation to try a call that
// would get 503.
func printNextSteps(env Env, publicURL, team, email, key, signIn string, plan []devRoute, earlier int, redisDown string) {
	var routes strings.Builder
	for _, r := range plan {
		fmt.Fprintf(&routes, "  %-11s -> %s\n", store.Presets[r.preset].Prefix, describeRoute(r))
	}
	kept := "the next make run issues another and leaves this one working"
	if earlier > 0 {
		kept = fmt.Sprintf("the %d key(s) earlier make runs printed still work; revoke them in the console when done", earlier)
	}
	try := "Try it (the mock answers)"
	if plan[0].upstream == "" {
		try = "Try it (this call goes to the real Anthropic API and is billed)"
	}
	if redisDown != "" {
		try = "Calls get 503 until Redis answers: " + redisDown + ". Then"
	}
	fmt.Fprintf(env.Stdout, `
tollgate is running at %[1]s for team %[2]q. Its routes:
%[3]s
Your key for %[4]s (shown once; %[7]s):
  export TOLLGATE_KEY=%[5]s

%[8]s:
  curl -s %[1]s/anthropic/v1/messages -H "x-api-key: $TOLLGATE_KEY" -H "anthropic-version: 2023-06-01" \
    -H "content-type: application/json" \
    -d '{"model":"%[9]s","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}'

Or from an SDK, changing nothing but the base URL and key:
  anthropic.Anthropic(base_url="%[1]s/anthropic", api_key=os.environ["TOLLGATE_KEY"])
  OpenAI(base_url="%[1]s/openai/v1", api_key=os.environ["TOLLGATE_KEY"])

The console, to invite teammates, hand out keys and cut off a runaway loop:
  %[6]s

Or from the command line:
  go run ./cmd/tollgate admin add-member --team %[2]s --email alice@example.com
  go run ./cmd/tollgate admin issue-key --team %[2]s --member alice@example.com
Press Ctrl-C to stop.
`, publicURL, team, routes.String(), email, key, signIn, kept, try, exampleModel)
}
