package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
)

const adminUsage = `usage: tollgate admin <verb> [flags]   (add --json for machine-readable output)
  create-team    --name N
  add-member     --team T --email E [--role member|owner]   (prints a one-time invite link: they are invited until they use it)
  remove-member  --team T --member E   (for good: keys revoked, sessions end; usage and audit history stay;
                 not yourself, not the last active owner)
  add-route      --team T [--preset anthropic|openai] [--prefix /p] [--upstream URL]
                 [--dialect anthropic|openai|generic] [--header H] [--credential-env VAR]
                 [--format 'Bearer {}'] [--fail-mode closed|open]
  add-target     --team T --prefix /p --upstream URL [--credential-env VAR]
                 (spread the route over one more upstream: a second account, region or fallback)
  remove-target  --team T --prefix /p --upstream URL [--credential-env VAR]
  delete-route   --team T --prefix /p   (the gateway stops serving the prefix; usage history stays)
  set-route      --team T --prefix /p [--attempts 1..5] [--health-path /v1/models|none]
                 (attempts: retries of idempotent requests only; a health path turns on probes)
  issue-key      --team T --member E [--name N]     (prints the key once)
  rotate-key     --key ID [--grace 24h]              (old key works until the grace ends)
  revoke-key     --key ID
  set-limits     --team T [--member E] [--rate-algorithm token_bucket|sliding_window]
                 [--rate-limit N] [--rate-period 1s] [--rate-burst N] [--concurrency N] [--tokens-per-minute N]
                 [--budget-usd 25.00|none] [--budget-period total|daily|monthly]
                 (no --member: team-wide; what is not given stays; 0 or none removes; the API's names;
                 --algorithm, --rate, --period, --burst, --tpm and --budget are the same flags)
                 [--over-budget refuse|fit]   (team-wide, for members in no tier: fit lowers max_tokens to the budget left)
  disable-member --team T --member E
  enable-member  --team T --member E
  set-role       --team T --member E --role owner|member   (the last active owner cannot be demoted or disabled)
  list           teams | members|keys|routes --team T
  audit          [--team T] [--limit 50]
  setup-link     prints a one-time link (24h) that creates the first team and its owner in the console
                 (refused once the gateway has an owner)
  invite         --team T --email E [--role member|owner]   (prints a one-time link (72h) to join T)
  set-price      --model M [--input 3.00] [--output 15.00] [--cache-write 3.75] [--cache-write-1h 6.00]
                 [--cache-read 0.30] [--max-output N] [--tier-threshold N --tier-input 6.00 --tier-output 22.50
                 [--tier-cache-write ..] [--tier-cache-write-1h ..] [--tier-cache-read ..]] [--provider P]
                 [--taken-on YYYY-MM-DD]   ($ per million tokens, exact to $0.000001; a new model needs
                 --input, --output and --max-output; --tier-threshold 0 removes the tier)
  list-prices    [--provider P] [--model PREFIX]
  usage          --team T [--member E] [--since 24h] [--limit 100]   (ledger: tokens by class, held and settled cost)
  reconcile      --team T [--provider-log FILE|URL] [--since 24h] [--skip-redis]
                 (ledger vs Redis spend counters and the provider's usage log; exit 1 on any difference
                 and when Redis could not be read, unless --skip-redis)
  token          create|list|revoke   admin tokens for the JSON API (tollgate admin token)
  tier           create|set|assign|list|delete   named limit presets; members' own limits win (tollgate admin tier)
  budget         list|approve|decline|request   members' requests for more budget (tollgate admin budget)`

// adminCmd is one verb's parsed context.
type adminCmd struct {
	ctx          context.Context
	pool         *pgxpool.Pool
	closeLimiter func()
	lim          limiter.Limiter // set when REDIS_URL is
	env          Env
	cfg          config.Config
	st           *store.Store
	json         bool
	flags        *flag.FlagSet
}

func admin(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		// As bare `tollgate` does: a missing verb is a usage mistake (exit 2), and
		// the usage goes to stderr with the error, not to stdout.
		return usagef("admin: missing verb\n%s", adminUsage)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stdout, adminUsage)
		return nil
	}
	verbs := map[string]func(context.Context, *adminCmd, []string) error{
		"create-team": createTeam, "add-member": addMember, "remove-member": removeMember,
		"add-route": addRoute, "delete-route": deleteRoute,
		"add-target": routeTarget(true), "remove-target": routeTarget(false), "set-route": setRoute,
		"issue-key": issueKey, "rotate-key": rotateKey, "revoke-key": revokeKey,
		"disable-member": setMemberStatus(store.StatusDisabled), "enable-member": setMemberStatus(store.StatusActive),
		"set-role": setMemberRole, "invite": invite,
		"list": list, "audit": audit, "set-limits": setLimits, "setup-link": setupLink,
		"set-price": setPrice, "list-prices": listPrices, "usage": usageReport, "reconcile": reconcile,
		"token": adminToken, "tier": adminTier, "budget": adminBudget,
	}
	verb, ok := verbs[args[0]]
	if !ok {
		return usagef("unknown admin verb %q; see tollgate admin help", args[0])
	}
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	env.Stdout, env.Stderr = terminalWriter{env.Stdout}, terminalWriter{env.Stderr}
	cmd := &adminCmd{ctx: ctx, env: env, cfg: cfg, flags: newFlagSet("admin " + args[0])}
	cmd.flags.BoolVar(&cmd.json, "json", false, "print JSON")
	defer cmd.close()
	return verb(ctx, cmd, args[1:])
}

// parse parses flags, checks the required ones were given and only then opens
// the database, so a typo is reported as a typo even when Postgres is down.
func (c *adminCmd) parse(args []string, required ...string) error {
	if err := parseFlags(c.flags, args); err != nil {
		return err
	}
	for _, name := range required {
		if c.flags.Lookup(name).Value.String() == "" {
			return usagef("%s: --%s is required", c.flags.Name(), name)
		}
	}
	return c.connect()
}

func (c *adminCmd) connect() error {
	pool, err := openPool(c.ctx, c.cfg)
	if err != nil {
		return err
	}
	c.pool = pool
	// Checked as the gateway checks what it saves: OUTBOUND_ALLOW, its listeners and the credential grants.
	c.st = store.New(pool).WithOutbound(app.OutboundGuard(c.cfg)).WithGrants(c.cfg.CredentialGrants)
	if c.cfg.RedisURL != "" {
		// Revocations and cut-offs made here bind on every replica at the next request.
		log := slog.New(slog.NewTextHandler(c.env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		lim, closeLimiter, err := app.NewLimiter(c.ctx, c.cfg, log)
		if err != nil {
			return err
		}
		c.closeLimiter, c.lim = closeLimiter, lim
		c.st = c.st.WithMirror(lim, log)
	}
	return nil
}

func (c *adminCmd) close() {
	if c.closeLimiter != nil {
		c.closeLimiter()
	}
	if c.pool != nil {
		c.pool.Close()
	}
}

// print writes v as JSON, or runs human to write it for a person.
func (c *adminCmd) print(v any, human func(w io.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	human(tw)
	return tw.Flush()
}

// route finds team t's route by its prefix.
func (c *adminCmd) route(ctx context.Context, t store.Team, prefix string) (store.Route, error) {
	routes, err := c.st.Routes(ctx, t.ID)
	if err != nil {
		return store.Route{}, err
	}
	i := slices.IndexFunc(routes, func(r store.Route) bool { return r.Prefix == prefix })
	if i < 0 {
		return store.Route{}, fmt.Errorf("team %s has no route %s (list them with: tollgate admin list routes --team %s)", t.Name, prefix, t.Name)
	}
	return routes[i], nil
}

func (c *adminCmd) team(ctx context.Context, ref string) (store.Team, error) {
	t, err := c.st.FindTeam(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return t, fmt.Errorf("no team %q (list them with: tollgate admin list teams)", ref)
	}
	return t, err
}

func (c *adminCmd) member(ctx context.Context, teamRef, memberRef string) (store.Team, store.Member, error) {
	t, err := c.team(ctx, teamRef)
	if err != nil {
		return t, store.Member{}, err
	}
	m, err := c.st.FindMember(ctx, t.ID, memberRef)
	if errors.Is(err, store.ErrNotFound) {
		return t, m, fmt.Errorf("no member %q in team %s", memberRef, t.Name)
	}
	return t, m, err
}

// keyTeam finds a key's team; the operator names keys by id alone.
func (c *adminCmd) keyTeam(ctx context.Context, keyID string) (int64, error) {
	teamID, err := c.st.KeyTeam(ctx, keyID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("no key %q", keyID)
	}
	return teamID, err
}

func conflict(err error, what string) error {
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%s already exists", what)
	}
	return err
}

func createTeam(ctx context.Context, c *adminCmd, args []string) error {
	name := c.flags.String("name", "", "team name")
	if err := c.parse(args, "name"); err != nil {
		return err
	}
	t, err := c.st.CreateTeam(ctx, store.ActorCLI, *name)
	if err != nil {
		return conflict(err, "team "+*name)
	}
	return c.print(t, func(w io.Writer) { fmt.Fprintf(w, "created team %s (id %d)\n", t.Name, t.ID) })
}

func addMember(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	email := c.flags.String("email", "", "member email")
	role := c.flags.String("role", store.RoleMember, "member or owner")
	if err := c.parse(args, "team", "email"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	m, token, inv, err := c.st.AddMemberInvited(ctx, store.ActorCLI, t.ID, *email, *role)
	if err != nil {
		return conflict(err, "member "+*email)
	}
	// Named as the admin API names them.
	out := struct {
		store.Member
		InviteLink      string    `json:"invite_link"`
		InviteExpiresAt time.Time `json:"invite_expires_at"`
	}{m, console.InviteURL(c.cfg.PublicURL, token), inv.ExpiresAt}
	return c.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "added %s to %s as %s (id %d), invited: send them this link to set a password. It works once, until %s:\n  %s\n",
			m.Email, t.Name, m.Role, m.ID, inv.ExpiresAt.UTC().Format(time.RFC3339), out.InviteLink)
	})
}

func removeMember(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	if err := c.parse(args, "team", "member"); err != nil {
		return err
	}
	t, m, err := c.member(ctx, *teamRef, *memberRef)
	if err != nil {
		return err
	}
	if m, err = c.st.RemoveMember(ctx, store.ActorCLI, t.ID, m.ID); err != nil {
		return err
	}
	return c.print(m, func(w io.Writer) {
		fmt.Fprintf(w, "removed %s from %s: their keys are revoked and their sessions end at once; their usage and audit history stay\n", m.Email, t.Name)
	})
}

func deleteRoute(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	prefix := c.flags.String("prefix", "", "the route's prefix, e.g. /anthropic")
	if err := c.parse(args, "team", "prefix"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	route, err := c.route(ctx, t, *prefix)
	if err != nil {
		return err
	}
	r, err := c.st.DeleteRoute(ctx, store.ActorCLI, t.ID, route.ID)
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "deleted route %s of %s: the gateway stops serving it at once; its usage history stays\n", r.Prefix, t.Name)
	})
}

func addRoute(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	var spec store.RouteSpec
	c.flags.StringVar(&spec.Preset, "preset", "", "anthropic or openai")
	c.flags.StringVar(&spec.Prefix, "prefix", "", "path prefix, e.g. /anthropic")
	c.flags.StringVar(&spec.UpstreamURL, "upstream", "", "upstream base URL")
	c.flags.StringVar(&spec.Dialect, "dialect", "", "anthropic, openai or generic")
	c.flags.StringVar(&spec.CredentialHeader, "header", "", "header to inject the credential into")
	c.flags.StringVar(&spec.CredentialEnv, "credential-env", "", "environment variable holding the credential")
	c.flags.StringVar(&spec.CredentialFormat, "format", "", "credential format, e.g. 'Bearer {}'")
	c.flags.StringVar(&spec.FailMode, "fail-mode", "", "closed or open when Redis is unreachable")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	if spec.Preset == "" && (spec.Prefix == "" || spec.UpstreamURL == "" || spec.Dialect == "") {
		return usagef("admin add-route: give --preset, or --prefix, --upstream and --dialect")
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	spec.TeamID = t.ID
	r, err := c.st.AddRoute(ctx, store.ActorCLI, spec)
	if err != nil {
		return conflict(err, "a route with that prefix")
	}
	return c.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "route %s -> %s (%s) for team %s\n", r.Prefix, r.UpstreamURL, r.Dialect, t.Name)
		if r.CredentialHeader != "" {
			state := "is set"
			if c.env.Getenv(r.CredentialEnv) == "" {
				state = "is NOT set in this environment; set it where the gateway runs"
			}
			fmt.Fprintf(w, "credential: header %s from $%s, which %s\n", r.CredentialHeader, r.CredentialEnv, state)
		}
	})
}

// routeTarget adds a target to a route, or removes one.
func routeTarget(add bool) func(context.Context, *adminCmd, []string) error {
	return func(ctx context.Context, c *adminCmd, args []string) error {
		teamRef := c.flags.String("team", "", "team name or id")
		prefix := c.flags.String("prefix", "", "the route's prefix, e.g. /anthropic")
		var target store.RouteTarget
		c.flags.StringVar(&target.UpstreamURL, "upstream", "", "the target's base URL")
		c.flags.StringVar(&target.CredentialEnv, "credential-env", "", "its own credential variable (default: the route's)")
		if err := c.parse(args, "team", "prefix", "upstream"); err != nil {
			return err
		}
		t, err := c.team(ctx, *teamRef)
		if err != nil {
			return err
		}
		if !add {
			if err := c.st.RemoveRouteTarget(ctx, store.ActorCLI, t.ID, *prefix, target); errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("route %s of team %s has no such target (list them with: tollgate admin list routes --team %s)", *prefix, t.Name, t.Name)
			} else if err != nil {
				return err
			}
			fmt.Fprintf(c.env.Stdout, "route %s no longer sends traffic to %s\n", *prefix, target.UpstreamURL)
			return nil
		}
		err = c.st.AddRouteTarget(ctx, store.ActorCLI, t.ID, *prefix, target)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("team %s has no route %s (list them with: tollgate admin list routes --team %s)", t.Name, *prefix, t.Name)
		case err != nil:
			return conflict(err, "that target on route "+*prefix)
		}
		fmt.Fprintf(c.env.Stdout, "route %s now also sends traffic to %s\n", *prefix, target.UpstreamURL)
		if target.CredentialEnv != "" && c.env.Getenv(target.CredentialEnv) == "" {
			fmt.Fprintf(c.env.Stdout, "credential: $%s is NOT set in this environment; set it where the gateway runs\n", target.CredentialEnv)
		}
		return nil
	}
}

func setRoute(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	prefix := c.flags.String("prefix", "", "the route's prefix")
	attempts := c.flags.Int("attempts", 0, "attempts of an idempotent request, the first included (1..5)")
	healthPath := c.flags.String("health-path", "", "path the health probes GET on each target, or none")
	if err := c.parse(args, "team", "prefix"); err != nil {
		return err
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	route, err := c.route(ctx, t, *prefix)
	if err != nil {
		return err
	}
	n, path := route.MaxAttempts, route.HealthPath
	// Given is not the same as non-zero: --attempts 0 is refused, not ignored.
	if flagGiven(c.flags, "attempts") {
		n = *attempts
	}
	switch *healthPath {
	case "":
	case "none":
		path = ""
	default:
		path = *healthPath
	}
	r, err := c.st.SetRouteResilience(ctx, store.ActorCLI, t.ID, *prefix, n, path)
	if err != nil {
		return err
	}
	return c.print(r, func(w io.Writer) {
		fmt.Fprintf(w, "route %s: %d attempts for idempotent requests, health probes %s\n", r.Prefix, r.MaxAttempts, cmp.Or(r.HealthPath, "off"))
	})
}

func issueKey(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	name := c.flags.String("name", "", "a label for the key")
	if err := c.parse(args, "team", "member"); err != nil {
		return err
	}
	t, m, err := c.member(ctx, *teamRef, *memberRef)
	if err != nil {
		return err
	}
	k, err := c.st.IssueKey(ctx, store.ActorCLI, t.ID, m.ID, *name)
	if err != nil {
		return err
	}
	return c.print(k, func(w io.Writer) {
		fmt.Fprintf(w, "key %s for %s in %s. It is shown only this once:\n%s\n", k.ID, m.Email, t.Name, k.Plaintext)
	})
}

func rotateKey(ctx context.Context, c *adminCmd, args []string) error {
	keyID := c.flags.String("key", "", "key id")
	grace := c.flags.Duration("grace", c.cfg.KeyRotationGrace, "how long the old key keeps working")
	if err := c.parse(args, "key"); err != nil {
		return err
	}
	teamID, err := c.keyTeam(ctx, *keyID)
	if err != nil {
		return err
	}
	k, err := c.st.RotateKey(ctx, store.ActorCLI, teamID, *keyID, *grace)
	if err != nil {
		return err
	}
	return c.print(k, func(w io.Writer) {
		fmt.Fprintf(w, "key %s replaces %s; the old key works until %s. The new key is shown only this once:\n%s\n",
			k.ID, *keyID, time.Now().Add(*grace).UTC().Format(time.RFC3339), k.Plaintext)
	})
}

func revokeKey(ctx context.Context, c *adminCmd, args []string) error {
	keyID := c.flags.String("key", "", "key id")
	if err := c.parse(args, "key"); err != nil {
		return err
	}
	teamID, err := c.keyTeam(ctx, *keyID)
	if err != nil {
		return err
	}
	k, err := c.st.RevokeKey(ctx, store.ActorCLI, teamID, *keyID)
	if err != nil {
		return err
	}
	return c.print(k, func(w io.Writer) { fmt.Fprintf(w, "revoked key %s\n", k.ID) })
}

func setMemberStatus(status string) func(context.Context, *adminCmd, []string) error {
	return func(ctx context.Context, c *adminCmd, args []string) error {
		teamRef := c.flags.String("team", "", "team name or id")
		memberRef := c.flags.String("member", "", "member email or id")
		if err := c.parse(args, "team", "member"); err != nil {
			return err
		}
		t, m, err := c.member(ctx, *teamRef, *memberRef)
		if err != nil {
			return err
		}
		m, err = c.st.SetMemberStatus(ctx, store.ActorCLI, t.ID, m.ID, status)
		if err != nil {
			return err
		}
		return c.print(m, func(w io.Writer) { fmt.Fprintf(w, "member %s of %s is now %s\n", m.Email, t.Name, m.Status) })
	}
}

func setMemberRole(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "member email or id")
	role := c.flags.String("role", "", "owner or member")
	if err := c.parse(args, "team", "member", "role"); err != nil {
		return err
	}
	t, m, err := c.member(ctx, *teamRef, *memberRef)
	if err != nil {
		return err
	}
	m, err = c.st.SetMemberRole(ctx, store.ActorCLI, t.ID, m.ID, *role)
	if err != nil {
		return err
	}
	return c.print(m, func(w io.Writer) { fmt.Fprintf(w, "member %s of %s is now %s\n", m.Email, t.Name, m.Role) })
}

func list(ctx context.Context, c *adminCmd, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("admin list: say what to list: teams, members, keys or routes")
	}
	what := args[0]
	switch what {
	case "teams", "members", "keys", "routes":
	default:
		return usagef("admin list: cannot list %q: use teams, members, keys or routes", what)
	}
	teamRef := c.flags.String("team", "", "team name or id")
	if err := parseFlags(c.flags, args[1:]); err != nil {
		return err
	}
	if what != "teams" && *teamRef == "" {
		return usagef("admin list %s: --team is required", what)
	}
	if err := c.connect(); err != nil {
		return err
	}
	if what == "teams" {
		teams, err := c.st.Teams(ctx)
		if err != nil {
			return err
		}
		return c.print(teams, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tNAME\tCREATED")
			for _, t := range teams {
				fmt.Fprintf(w, "%d\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.DateTime))
			}
		})
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	switch what {
	case "members":
		members, err := c.st.Members(ctx, t.ID)
		if err != nil {
			return err
		}
		// The limits that bind: tier, own and this period's grants.
		limits, err := c.st.TeamMemberLimits(ctx, t.ID)
		if err != nil {
			return err
		}
		return c.print(members, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tEMAIL\tROLE\tSTATUS\tLIMITS")
			for _, m := range members {
				l, ok := limits[m.ID]
				if !ok {
					l = store.NoLimits()
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", m.ID, m.Email, m.Role, m.State(), describeLimits(l))
			}
		})
	case "keys":
		keys, err := c.st.Keys(ctx, t.ID)
		if err != nil {
			return err
		}
		return c.print(keys, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tMEMBER\tNAME\tSTATE\tCREATED")
			for _, k := range keys {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", k.ID, k.MemberID, k.Name, k.State(time.Now()), k.CreatedAt.UTC().Format(time.DateTime))
			}
		})
	default: // routes
		routes, err := c.st.Routes(ctx, t.ID)
		if err != nil {
			return err
		}
		return c.print(routes, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tPREFIX\tUPSTREAM\tDIALECT\tCREDENTIAL\tATTEMPTS\tHEALTH")
			for _, r := range routes {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Prefix, r.UpstreamURL, r.Dialect,
					credentialSummary(r.CredentialHeader, r.CredentialEnv, c.env.Getenv), r.MaxAttempts, cmp.Or(r.HealthPath, "off"))
				if r.Disabled != "" {
					fmt.Fprintf(w, "\t\tDISABLED: %s\t\t\t\t\n", r.Disabled)
				}
				for _, tg := range r.Targets {
					fmt.Fprintf(w, "\t\t+ %s\t\t%s\t\t\n", tg.UpstreamURL,
						credentialSummary(r.CredentialHeader, cmp.Or(tg.CredentialEnv, r.CredentialEnv), c.env.Getenv))
				}
			}
		})
	}
}

// credentialSummary says whether a route's credential is configured, never
// what it is. It can only see this shell's environment, not the gateway's
// (which the console reports), so it says which one it means; the built-in
// mock's credential is one tollgate dev sets in its own process.
func credentialSummary(header, env string, getenv func(string) string) string {
	switch {
	case header == "":
		return "none"
	case getenv(env) != "":
		return header + " from $" + env + " (set in this shell)"
	case env == mockCredentialEnv:
		return header + " from $" + env + " (not set in this shell; tollgate dev sets it in its own process for its built-in mock)"
	}
	return header + " from $" + env + " (not set in this shell; the gateway reads its own environment)"
}

func audit(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	limit := c.flags.Int("limit", 50, "how many entries")
	if err := c.parse(args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 10000 {
		return usagef("admin audit: --limit must be from 1 to 10000")
	}
	var teamID *int64
	if *teamRef != "" {
		t, err := c.team(ctx, *teamRef)
		if err != nil {
			return err
		}
		teamID = &t.ID
	}
	entries, err := c.st.Audit(ctx, teamID, int32(*limit))
	if err != nil {
		return err
	}
	return c.print(entries, func(w io.Writer) {
		fmt.Fprintln(w, "AT\tACTOR\tACTION\tTARGET")
		for _, e := range entries {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.DateTime), e.Actor, e.Action, e.Target)
		}
	})
}
