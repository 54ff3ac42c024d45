package cli_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/store"
)

// plaintextKey matches a member key anywhere in output.
var plaintextKey = regexp.MustCompile(`tg_[a-z2-7]{13}_[a-z2-7]{52}`)

// keyPrefix is where a key (or the start of one) begins in printed text. A key id
// that ends in "tg" puts "tg_" inside the key too, which this does not count.
var keyPrefix = regexp.MustCompile(`\btg_`)

// wantOutput fails unless out contains every one of wants.
func wantOutput(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s printed %q, want it to contain %q", what, out, w)
		}
	}
}

// issued runs issue-key (human output) and returns the one key it printed.
func (c *tool) issue(args ...string) string {
	c.t.Helper()
	out := c.ok(append([]string{"admin", "issue-key"}, args...)...)
	keys := plaintextKey.FindAllString(out, -1)
	if len(keys) != 1 || len(keyPrefix.FindAllString(out, -1)) != 1 {
		c.t.Fatalf("issue-key printed %q, want exactly one key", out)
	}
	return keys[0]
}

func keyID(plaintext string) string { return strings.Split(plaintext, "_")[1] }

func TestAdminEndToEnd(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	const providerSecret = "sk-ant-provider-secret-never-printed"
	c.vars["ANTHROPIC_API_KEY"] = providerSecret
	c.vars["CREDENTIAL_GRANTS"] = "TOLLGATE_CREDENTIAL_SECOND: hosts=api.anthropic.com teams=acme"

	// Teams and members, human and JSON.
	wantOutput(t, "create-team", c.ok("admin", "create-team", "--name", "acme"), "created team acme (id ")
	var beta store.Team
	c.json(&beta, "admin", "create-team", "--name", "beta")
	if beta.Name != "beta" || beta.ID == 0 || beta.CreatedAt.IsZero() {
		t.Errorf("create-team --json = %+v", beta)
	}
	wantOutput(t, "add-member", c.ok("admin", "add-member", "--team", "acme", "--email", "Alice@Example.com"),
		"added alice@example.com to acme as member (id ")
	var bob store.Member
	c.json(&bob, "admin", "add-member", "--team", "acme", "--email", "bob@example.com", "--role", "owner")
	if bob.Email != "bob@example.com" || bob.Role != "owner" || bob.Status != "active" || bob.ID == 0 {
		t.Errorf("add-member --json = %+v", bob)
	}

	// Routes: both presets and a generic one.
	wantOutput(t, "add-route --preset anthropic", c.ok("admin", "add-route", "--team", "acme", "--preset", "anthropic"),
		"route /anthropic -> https://api.anthropic.com (anthropic) for team acme",
		"credential: header x-api-key from $ANTHROPIC_API_KEY, which is set")
	var openai store.Route
	out := c.json(&openai, "admin", "add-route", "--team", "acme", "--preset", "openai")
	if openai.Prefix != "/openai" || openai.Dialect != "openai" || openai.CredentialHeader != "Authorization" ||
		openai.CredentialEnv != "OPENAI_API_KEY" || openai.CredentialFormat != "Bearer {}" || openai.FailMode != "closed" {
		t.Errorf("add-route --preset openai --json = %s", out)
	}
	wantOutput(t, "add-route --preset openai (human)", c.ok("admin", "add-route", "--team", "beta", "--preset", "openai"),
		"$OPENAI_API_KEY, which is NOT set in this environment")
	var generic store.Route
	c.json(&generic, "admin", "add-route", "--team", "acme", "--prefix", "/local", "--upstream", "http://127.0.0.1:9",
		"--dialect", "generic", "--fail-mode", "open")
	if generic.Prefix != "/local" || generic.UpstreamURL != "http://127.0.0.1:9" || generic.CredentialHeader != "" || generic.FailMode != "open" {
		t.Errorf("generic route = %+v", generic)
	}
	wantOutput(t, "list routes", c.ok("admin", "list", "routes", "--team", "acme"), "PREFIX",
		"/anthropic", "x-api-key from $ANTHROPIC_API_KEY (set in this shell)", "Authorization from $OPENAI_API_KEY (not set in this shell; the gateway reads its own environment)", "/local")

	// Targets: a second provider account on the anthropic route, and probes.
	wantOutput(t, "add-target", c.ok("admin", "add-target", "--team", "acme", "--prefix", "/anthropic",
		"--upstream", "https://api.anthropic.com", "--credential-env", "TOLLGATE_CREDENTIAL_SECOND"),
		"route /anthropic now also sends traffic to https://api.anthropic.com", "$TOLLGATE_CREDENTIAL_SECOND is NOT set")
	// The deployment's grants bind the CLI as they bind the console and the API.
	for _, args := range [][]string{
		{"add-target", "--team", "acme", "--prefix", "/anthropic", "--upstream", "https://evil.example"},
		{"add-route", "--team", "beta", "--prefix", "/second", "--upstream", "https://api.anthropic.com", "--dialect", "anthropic",
			"--header", "x-api-key", "--credential-env", "TOLLGATE_CREDENTIAL_SECOND"},
	} {
		if out, err := c.run(append([]string{"admin"}, args...)...); err == nil || !strings.Contains(err.Error(), "may only be sent to") &&
			!strings.Contains(err.Error(), "not granted to team beta") {
			t.Errorf("%s: %q, %v, want it refused by the grants", args[0], out, err)
		}
	}
	wantOutput(t, "set-route", c.ok("admin", "set-route", "--team", "acme", "--prefix", "/anthropic", "--attempts", "3",
		"--health-path", "/v1/models"), "route /anthropic: 3 attempts for idempotent requests, health probes /v1/models")
	var routes []store.Route
	c.json(&routes, "admin", "list", "routes", "--team", "acme")
	if i := slices.IndexFunc(routes, func(r store.Route) bool { return r.Prefix == "/anthropic" }); i < 0 ||
		len(routes[i].Targets) != 1 || routes[i].Targets[0].CredentialEnv != "TOLLGATE_CREDENTIAL_SECOND" ||
		routes[i].MaxAttempts != 3 || routes[i].HealthPath != "/v1/models" {
		t.Errorf("list routes --json = %+v", routes)
	}
	wantOutput(t, "list routes with a target", c.ok("admin", "list", "routes", "--team", "acme"),
		"+ https://api.anthropic.com", "x-api-key from $TOLLGATE_CREDENTIAL_SECOND (not set in this shell; the gateway reads its own environment)", "/v1/models")
	wantOutput(t, "remove-target", c.ok("admin", "remove-target", "--team", "acme", "--prefix", "/anthropic",
		"--upstream", "https://api.anthropic.com", "--credential-env", "TOLLGATE_CREDENTIAL_SECOND"),
		"route /anthropic no longer sends traffic to https://api.anthropic.com")

	// Keys: shown once, never listed.
	laptop := c.issue("--team", "acme", "--member", "alice@example.com", "--name", "laptop")
	var ci store.IssuedKey
	c.json(&ci, "admin", "issue-key", "--team", "acme", "--member", "alice@example.com", "--name", "ci")
	if !plaintextKey.MatchString(ci.Plaintext) || keyID(ci.Plaintext) != ci.ID || ci.Name != "ci" || ci.TeamID == 0 {
		t.Errorf("issue-key --json = %+v", ci)
	}
	listed := c.ok("admin", "list", "keys", "--team", "acme")
	wantOutput(t, "list keys", listed, keyID(laptop), ci.ID, "laptop", "active")
	var keys []store.Key
	listedJSON := c.json(&keys, "admin", "list", "keys", "--team", "acme")
	if len(keys) != 2 {
		t.Errorf("list keys --json = %s, want 2 keys", listedJSON)
	}
	for _, out := range []string{listed, listedJSON} {
		if plaintextKey.MatchString(out) || strings.Contains(out, laptop[len(laptop)-52:]) || strings.Contains(out, "secret") {
			t.Errorf("list keys shows a key's plaintext or secret: %s", out)
		}
	}

	// Rotate with grace, rotate twice, rotate with no grace, revoke.
	rotated := c.ok("admin", "rotate-key", "--key", keyID(laptop), "--grace", "1h")
	newKeys := plaintextKey.FindAllString(rotated, -1)
	if len(newKeys) != 1 || newKeys[0] == laptop {
		t.Fatalf("rotate-key printed %q, want one new key", rotated)
	}
	wantOutput(t, "rotate-key", rotated, "replaces "+keyID(laptop))
	wantOutput(t, "list keys after rotate", c.ok("admin", "list", "keys", "--team", "acme"), "grace")
	if _, err := c.run("admin", "rotate-key", "--key", keyID(laptop)); err == nil || !strings.Contains(err.Error(), "already rotated") {
		t.Errorf("second rotate of %s: err = %v, want already rotated", keyID(laptop), err)
	}
	var third store.IssuedKey
	c.json(&third, "admin", "rotate-key", "--key", keyID(newKeys[0]), "--grace", "0s")
	wantOutput(t, "revoke-key", c.ok("admin", "revoke-key", "--key", ci.ID), "revoked key "+ci.ID)
	c.json(&keys, "admin", "list", "keys", "--team", "acme")
	states := map[string]string{}
	for _, k := range keys {
		states[k.ID] = k.State(time.Now())
	}
	want := map[string]string{keyID(laptop): "grace", keyID(newKeys[0]): "revoked", third.ID: "active", ci.ID: "revoked"}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("key %s is %q, want %q (all: %v)", id, states[id], s, states)
		}
	}

	// Cut a member off and restore them.
	wantOutput(t, "disable-member", c.ok("admin", "disable-member", "--team", "acme", "--member", "alice@example.com"),
		"member alice@example.com of acme is now disabled")
	if _, err := c.run("admin", "issue-key", "--team", "acme", "--member", "alice@example.com"); err == nil ||
		!strings.Contains(err.Error(), "disabled") {
		t.Errorf("issue-key for a disabled member: err = %v", err)
	}
	var alice store.Member
	c.json(&alice, "admin", "enable-member", "--team", "acme", "--member", "alice@example.com")
	if alice.Status != "active" {
		t.Errorf("enable-member --json = %+v", alice)
	}
	c.issue("--team", "acme", "--member", "alice@example.com")

	// Lists.
	wantOutput(t, "list teams", c.ok("admin", "list", "teams"), "NAME", "acme", "beta")
	var teams []store.Team
	if c.json(&teams, "admin", "list", "teams"); len(teams) != 2 {
		t.Errorf("list teams --json = %+v", teams)
	}
	wantOutput(t, "list members", c.ok("admin", "list", "members", "--team", "acme"),
		"alice@example.com", "member", "bob@example.com", "owner", "invited") // neither has used their invite link yet
	var members []store.Member
	if c.json(&members, "admin", "list", "members", "--team", "acme"); len(members) != 2 {
		t.Errorf("list members --json = %+v", members)
	}

	// The audit log shows every action, by the CLI.
	wantOutput(t, "audit", c.ok("admin", "audit", "--team", "acme"), "ACTION", "team.create", "member.add",
		"route.add", "key.issue", "key.rotate", "key.revoke", "member.status")
	var entries []store.AuditEntry
	c.json(&entries, "admin", "audit", "--team", "beta")
	if len(entries) != 2 || entries[0].Action != "route.add" || entries[1].Action != "team.create" || entries[1].Actor != "cli" {
		t.Errorf("audit --team beta = %+v, want route.add then team.create by cli", entries)
	}
	all := c.json(&entries, "admin", "audit", "--limit", "3")
	if len(entries) != 3 {
		t.Errorf("audit --limit 3 returned %d entries", len(entries))
	}
	all += c.ok("admin", "audit", "--limit", "10000")
	if plaintextKey.MatchString(all) || strings.Contains(all, providerSecret) {
		t.Errorf("audit shows a key or the provider secret:\n%s", all)
	}
}

func TestAdminMistakes(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "alice@example.com")
	revoked := keyID(c.issue("--team", "acme", "--member", "alice@example.com"))
	c.ok("admin", "revoke-key", "--key", revoked)
	route := func(upstream string, extra ...string) []string {
		return append([]string{"admin", "add-route", "--team", "acme", "--prefix", "/x", "--upstream", upstream, "--dialect", "generic"}, extra...)
	}
	tests := []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"UnknownVerb", []string{"admin", "drop-team"}, true, `unknown admin verb "drop-team"`},
		{"MissingName", []string{"admin", "create-team"}, true, "--name is required"},
		{"MissingEmail", []string{"admin", "add-member", "--team", "acme"}, true, "--email is required"},
		{"MissingKey", []string{"admin", "revoke-key"}, true, "--key is required"},
		{"UnknownFlag", []string{"admin", "create-team", "--name", "x", "--colour", "red"}, true, "flag provided but not defined: -colour"},
		{"StrayArgument", []string{"admin", "create-team", "--name", "x", "now"}, true, `unexpected argument "now"`},
		{"BadDuration", []string{"admin", "rotate-key", "--key", revoked, "--grace", "soon"}, true, `invalid value "soon" for flag -grace`},
		{"ListNothing", []string{"admin", "list"}, true, "say what to list"},
		{"ListUnknown", []string{"admin", "list", "budgets", "--team", "acme"}, true, `cannot list "budgets"`},
		{"ListMembersNoTeam", []string{"admin", "list", "members"}, true, "--team is required"},
		{"RouteNoUpstream", []string{"admin", "add-route", "--team", "acme", "--prefix", "/x"}, true, "--preset, or --prefix, --upstream and --dialect"},
		{"AuditLimit", []string{"admin", "audit", "--limit", "0"}, true, "--limit must be from 1 to 10000"},
		{"BadEmail", []string{"admin", "add-member", "--team", "acme", "--email", "alice"}, false, `"alice" is not an email address`},
		{"BadRole", []string{"admin", "add-member", "--team", "acme", "--email", "b@example.com", "--role", "god"}, false, "role must be owner or member"},
		{"BadTeamName", []string{"admin", "create-team", "--name", "Acme Corp"}, false, `team name "Acme Corp" must be`},
		{"DuplicateTeam", []string{"admin", "create-team", "--name", "acme"}, false, "team acme already exists"},
		{"DuplicateMember", []string{"admin", "add-member", "--team", "acme", "--email", "alice@example.com"}, false, "member alice@example.com already exists"},
		{"UnknownTeam", []string{"admin", "add-member", "--team", "nope", "--email", "b@example.com"}, false, `no team "nope"`},
		{"UnknownTeamID", []string{"admin", "list", "keys", "--team", "999999"}, false, `no team "999999"`},
		{"UnknownMember", []string{"admin", "issue-key", "--team", "acme", "--member", "zed@example.com"}, false, `no member "zed@example.com" in team acme`},
		{"UnknownMemberStatus", []string{"admin", "disable-member", "--team", "acme", "--member", "42"}, false, `no member "42"`},
		{"UnknownKeyRevoke", []string{"admin", "revoke-key", "--key", "aaaaaaaaaaaaa"}, false, `no key "aaaaaaaaaaaaa"`},
		{"UnknownKeyRotate", []string{"admin", "rotate-key", "--key", "nope"}, false, `no key "nope"`},
		{"RevokeTwice", []string{"admin", "revoke-key", "--key", revoked}, false, "key " + revoked + " is already revoked"},
		{"RotateRevoked", []string{"admin", "rotate-key", "--key", revoked}, false, "is revoked"},
		{"NegativeGrace", []string{"admin", "rotate-key", "--key", revoked, "--grace", "-1h"}, false, "grace must not be negative"},
		{"Metadata", route("http://169.254.169.254"), false, "link-local"},
		{"MetadataMappedIPv6", route("http://[::ffff:169.254.169.254]"), false, "link-local"},
		{"MetadataDecimal", route("http://2852039166/"), false, "non-standard form"},
		{"UpstreamUserinfo", route("http://me:pw@127.0.0.1"), false, "must not carry credentials"},
		{"CredentialDatabaseURL", route("http://127.0.0.1", "--header", "x-api-key", "--credential-env", "DATABASE_URL"), false, `credential variable "DATABASE_URL"`},
		{"PresetCredentialSessionKey", []string{"admin", "add-route", "--team", "acme", "--preset", "anthropic", "--credential-env", "SESSION_KEY"}, false, `"SESSION_KEY"`},
		{"ReservedPrefix", []string{"admin", "add-route", "--team", "acme", "--prefix", "/console", "--upstream", "http://127.0.0.1", "--dialect", "generic"}, false, "reserved"},
		{"UnknownPreset", []string{"admin", "add-route", "--team", "acme", "--preset", "gemini"}, false, `unknown preset "gemini"`},
		{"TargetNoRoute", []string{"admin", "add-target", "--team", "acme", "--prefix", "/nope", "--upstream", "http://127.0.0.1:9"}, false, "team acme has no route /nope"},
		{"TargetMetadata", []string{"admin", "add-target", "--team", "acme", "--prefix", "/nope", "--upstream", "http://169.254.169.254"}, false, "link-local"},
		{"TargetCredentialDatabaseURL", []string{"admin", "add-target", "--team", "acme", "--prefix", "/nope", "--upstream", "http://127.0.0.1:9",
			"--credential-env", "DATABASE_URL"}, false, `credential variable "DATABASE_URL"`},
		{"TargetMissingUpstream", []string{"admin", "add-target", "--team", "acme", "--prefix", "/x"}, true, "--upstream is required"},
		{"RemoveUnknownTarget", []string{"admin", "remove-target", "--team", "acme", "--prefix", "/nope", "--upstream", "http://127.0.0.1:9"}, false, "has no such target"},
		{"SetRouteAttempts", []string{"admin", "set-route", "--team", "acme", "--prefix", "/nope", "--attempts", "9"}, false, "team acme has no route /nope"},
	}
	t.Run("Cases", func(t *testing.T) { // returns once every parallel case has run
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				out, err := c.run(tt.args...)
				if err == nil {
					t.Fatalf("tollgate %v succeeded, printing %q", tt.args, out)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
					t.Errorf("error %q: want one line containing %q", msg, tt.want)
				}
				if _, usage := errors.AsType[*cli.UsageError](err); usage != tt.usage {
					t.Errorf("error %q (%T): usage error %v, want %v", err, err, usage, tt.usage)
				}
				if out != "" {
					t.Errorf("a failed command printed %q", out)
				}
			})
		}
	})
	// Nothing above changed anything: one team, one member with their invite, one revoked key, no route.
	var entries []store.AuditEntry
	if c.json(&entries, "admin", "audit"); len(entries) != 5 {
		t.Errorf("audit after the mistakes has %d entries, want 5: %+v", len(entries), entries)
	}
}
