package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/apikey"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// actor is the operator: a change by a person is checked against who they
// are (person_test.go), which these tests are not about.
const actor = store.ActorCLI

// fixture is a store on its own schema with one team and one active member.
type fixture struct {
	st     *store.Store
	pool   *pgxpool.Pool // the store's, to read what it wrote as stored
	team   store.Team
	member store.Member
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool := dbtest.Pool(t, dbtest.Schema(t))
	f := &fixture{st: store.New(pool).WithOutbound(apptest.Outbound()).WithGrants(testGrants), pool: pool}
	f.team = must(f.st.CreateTeam(t.Context(), actor, "acme"))(t)
	// In no tier, so each test starts from no limits and sets those it is about.
	f.member = must(f.st.AddMemberInTier(t.Context(), actor, f.team.ID, "alice@example.com", store.RoleMember, store.TierNone))(t)
	return f
}

// testGrants let the tests' credentials reach the loopback and private
// upstreams they write.
var testGrants = func() grant.Table {
	t, err := grant.Parse("ANTHROPIC_API_KEY: hosts=api.anthropic.com,127.0.0.1; OPENAI_API_KEY: hosts=api.openai.com,127.0.0.1;" +
		"TOLLGATE_CREDENTIAL_GROQ: hosts=10.0.0.5,127.0.0.1; TOLLGATE_CREDENTIAL_X: hosts=10.0.0.5,127.0.0.1; TOLLGATE_CREDENTIAL_SECOND: hosts=127.0.0.1")
	if err != nil {
		panic(err)
	}
	return t
}()

// must returns v, failing the test when err is set: must(f())(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func (f *fixture) snapshot(t *testing.T) *proxy.Snapshot {
	t.Helper()
	return must(f.st.Snapshot(t.Context(), slog.New(slog.DiscardHandler)))(t)
}

func (f *fixture) key(t *testing.T, id string) store.Key {
	t.Helper()
	for _, k := range must(f.st.Keys(t.Context(), f.team.ID))(t) {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("key %s not listed", id)
	return store.Key{}
}

// audited runs write and returns the audit rows it added, oldest first.
func (f *fixture) audited(t *testing.T, write func()) []store.AuditEntry {
	t.Helper()
	ctx := context.Background()
	before := must(f.st.Audit(ctx, nil, 1))(t)
	write()
	all := must(f.st.Audit(ctx, nil, 1000))(t)
	var added []store.AuditEntry
	for i := len(all) - 1; i >= 0; i-- {
		if len(before) == 0 || all[i].ID > before[0].ID {
			added = append(added, all[i])
		}
	}
	return added
}

// actions summarises audit rows as "action target, ...".
func actions(entries []store.AuditEntry) string {
	var s []string
	for _, e := range entries {
		s = append(s, e.Action+" "+e.Target)
	}
	return strings.Join(s, ", ")
}

func wantValidation(t *testing.T, err error, field string) {
	t.Helper()
	v, ok := errors.AsType[*store.ValidationError](err)
	if !ok || v.Field != field {
		t.Fatalf("err = %v, want a validation error on %q", err, field)
	}
	if strings.Contains(v.Message, "\n") {
		t.Errorf("message %q spans lines", v.Message)
	}
}

// refused checks that write fails with a validation error on field (or, for
// "conflict" and "notfound", with ErrConflict or ErrNotFound, and for "stale"
// with a StateError) and records nothing.
func (f *fixture) refused(t *testing.T, name, field string, write func() error) {
	t.Helper()
	var err error
	if entries := f.audited(t, func() { err = write() }); len(entries) != 0 {
		t.Errorf("%s: refused write audited %q", name, actions(entries))
	}
	if want := map[string]error{"conflict": store.ErrConflict, "notfound": store.ErrNotFound, "setupdone": store.ErrSetupDone}[field]; want != nil {
		if !errors.Is(err, want) {
			t.Errorf("%s: err = %v, want %v", name, err, want)
		}
		return
	}
	if field == "stale" {
		if _, ok := errors.AsType[*store.StateError](err); !ok {
			t.Errorf("%s: err = %v, want a StateError", name, err)
		}
		return
	}
	t.Run(name, func(t *testing.T) { wantValidation(t, err, field) })
}

func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()

	issued := must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "laptop"))(t)
	id, secret, ok := apikey.Parse(issued.Plaintext)
	if !ok || id != issued.ID || issued.MemberID != f.member.ID || issued.Name != "laptop" {
		t.Fatalf("issued %+v: plaintext does not parse as its own key", issued)
	}
	sk, ok := f.snapshot(t).Key(issued.ID)
	if !ok || sk.SecretHash != sha256.Sum256([]byte(secret)) || sk.Revoked || !sk.ExpiresAt.IsZero() {
		t.Fatalf("snapshot key = %+v, ok %v; want the secret's hash, live", sk, ok)
	}
	if got := f.key(t, issued.ID).State(time.Now()); got != "active" {
		t.Errorf("state after issue = %s, want active", got)
	}

	// Rotate with grace: the old key keeps working until the grace ends.
	var rotated store.IssuedKey
	entries := f.audited(t, func() {
		rotated = must(f.st.RotateKey(ctx, actor, f.team.ID, issued.ID, time.Hour))(t)
	})
	if got, want := actions(entries), "key.issue "+rotated.ID+", key.rotate "+issued.ID; got != want {
		t.Errorf("rotate audited %q, want %q", got, want)
	}
	old := f.key(t, issued.ID)
	if old.ReplacedBy == nil || *old.ReplacedBy != rotated.ID || old.RevokedAt != nil || old.ExpiresAt == nil {
		t.Fatalf("old key after rotate = %+v, want replaced by %s, expiring, not revoked", old, rotated.ID)
	}
	if d := time.Until(*old.ExpiresAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("old key expires in %s, want about 1h", d)
	}
	if got := old.State(time.Now()); got != "grace" {
		t.Errorf("old key state = %s, want grace", got)
	}
	if rotated.Name != "laptop" || rotated.MemberID != f.member.ID || rotated.Plaintext == issued.Plaintext {
		t.Errorf("replacement = %+v, want a new key for the same member and name", rotated)
	}
	snap := f.snapshot(t)
	if sk, _ := snap.Key(issued.ID); sk.Revoked || !sk.ExpiresAt.Equal(*old.ExpiresAt) {
		t.Errorf("snapshot old key = %+v, want expiring at %s and not revoked", sk, old.ExpiresAt)
	}
	if _, ok := snap.Key(rotated.ID); !ok {
		t.Error("snapshot lacks the replacement key")
	}

	// A rotated key cannot be rotated again, and a refused write records nothing.
	rotate := func(id string, grace time.Duration) func() error {
		return func() error { _, err := f.st.RotateKey(ctx, actor, f.team.ID, id, grace); return err }
	}
	f.refused(t, "RotateTwice", "stale", rotate(issued.ID, time.Hour))
	f.refused(t, "NegativeGrace", "grace", rotate(rotated.ID, -time.Second))

	// Grace 0 revokes the old key at once.
	third := must(f.st.RotateKey(ctx, actor, f.team.ID, rotated.ID, 0))(t)
	if k := f.key(t, rotated.ID); k.RevokedAt == nil || k.State(time.Now()) != "revoked" {
		t.Errorf("key rotated with grace 0 = %+v, want revoked", k)
	}
	if sk, _ := f.snapshot(t).Key(rotated.ID); !sk.Revoked {
		t.Error("snapshot: key rotated with grace 0 is not revoked")
	}

	// Revoke: at once, in the snapshot, audited; twice is not found.
	entries = f.audited(t, func() {
		if k := must(f.st.RevokeKey(ctx, actor, f.team.ID, third.ID))(t); k.RevokedAt == nil {
			t.Errorf("RevokeKey returned %+v without RevokedAt", k)
		}
	})
	if got := actions(entries); got != "key.revoke "+third.ID {
		t.Errorf("revoke audited %q", got)
	}
	if sk, ok := f.snapshot(t).Key(third.ID); !ok || !sk.Revoked {
		t.Errorf("snapshot revoked key = %+v, ok %v; want Revoked", sk, ok)
	}
	f.refused(t, "RevokeTwice", "stale", func() error { _, err := f.st.RevokeKey(ctx, actor, f.team.ID, third.ID); return err })
	f.refused(t, "RotateRevoked", "stale", rotate(third.ID, time.Hour))

	// No audit row holds a plaintext key or a secret.
	for _, e := range must(f.st.Audit(ctx, &f.team.ID, 1000))(t) {
		for _, s := range []string{secret, rotated.Plaintext, third.Plaintext} {
			if strings.Contains(string(e.Before)+string(e.After), s[len(s)-apikey.SecretLen:]) {
				t.Errorf("audit row %s %s holds a key secret", e.Action, e.Target)
			}
		}
	}
}

func TestOtherTeamsRowsAreNotFound(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	other := must(f.st.CreateTeam(ctx, actor, "other"))(t)
	key := must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, ""))(t)

	calls := map[string]func() error{
		"FindMemberByEmail": func() error { _, err := f.st.FindMember(ctx, other.ID, f.member.Email); return err },
		"FindMemberByID": func() error {
			_, err := f.st.FindMember(ctx, other.ID, strconv.FormatInt(f.member.ID, 10))
			return err
		},
		"RevokeKey": func() error { _, err := f.st.RevokeKey(ctx, actor, other.ID, key.ID); return err },
		"RotateKey": func() error { _, err := f.st.RotateKey(ctx, actor, other.ID, key.ID, 0); return err },
		"IssueKey":  func() error { _, err := f.st.IssueKey(ctx, actor, other.ID, f.member.ID, ""); return err },
		"SetMemberStatus": func() error {
			_, err := f.st.SetMemberStatus(ctx, actor, other.ID, f.member.ID, store.StatusDisabled)
			return err
		},
	}
	for name, call := range calls {
		f.refused(t, name+"WithOtherTeam", "notfound", call)
	}
	if k := f.key(t, key.ID); k.State(time.Now()) != "active" || k.ReplacedBy != nil {
		t.Errorf("key after cross-team writes = %+v, want untouched", k)
	}
	if m := must(f.st.FindMember(ctx, f.team.ID, f.member.Email))(t); m.Status != store.StatusActive {
		t.Errorf("member after cross-team writes = %+v, want active", m)
	}
	if keys := must(f.st.Keys(ctx, other.ID))(t); len(keys) != 0 {
		t.Errorf("other team has keys %+v", keys)
	}
	if _, err := f.st.KeyTeam(ctx, "aaaaaaaaaaaaa"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("KeyTeam(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestDisabledMemberGetsNoKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	key := must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, ""))(t)
	if m := must(f.st.SetMemberStatus(ctx, actor, f.team.ID, f.member.ID, store.StatusDisabled))(t); m.Status != store.StatusDisabled {
		t.Fatalf("member = %+v, want disabled", m)
	}
	if sm, ok := f.snapshot(t).Member(f.member.ID); !ok || !sm.Disabled {
		t.Errorf("snapshot member = %+v, want Disabled", sm)
	}
	f.refused(t, "IssueKey", "member", func() error { _, err := f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, ""); return err })
	f.refused(t, "RotateKey", "member", func() error { _, err := f.st.RotateKey(ctx, actor, f.team.ID, key.ID, time.Hour); return err })
	if k := f.key(t, key.ID); k.ReplacedBy != nil || k.ExpiresAt != nil {
		t.Errorf("refused rotate changed the key: %+v", k)
	}
	f.refused(t, "StatusUnknown", "status", func() error {
		_, err := f.st.SetMemberStatus(ctx, actor, f.team.ID, f.member.ID, "paused")
		return err
	})

	must(f.st.SetMemberStatus(ctx, actor, f.team.ID, f.member.ID, store.StatusActive))(t)
	must(f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, ""))(t)
}

func TestTeamAndMemberValidation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	other := must(f.st.CreateTeam(ctx, actor, "other"))(t)
	for _, name := range []string{"", "Acme", "-acme", "a_b", "a b", "a\nb", strings.Repeat("a", 64)} {
		f.refused(t, "team "+strconv.Quote(name), "name", func() error { _, err := f.st.CreateTeam(ctx, actor, name); return err })
	}
	f.refused(t, "duplicate team", "conflict", func() error { _, err := f.st.CreateTeam(ctx, actor, "acme"); return err })
	must(f.st.CreateTeam(ctx, actor, strings.Repeat("a", 63)))(t)

	members := []struct {
		team               int64
		email, role, field string
	}{
		{f.team.ID, "bob", store.RoleMember, "email"},
		{f.team.ID, "Bob <bob@example.com>", store.RoleMember, "email"},
		{f.team.ID, "bob@example.com\n", store.RoleMember, "email"},
		{f.team.ID, "bob@example.com", "admin", "role"},
		{f.team.ID, "Alice@Example.COM", store.RoleOwner, "conflict"},
		{other.ID, "alice@example.com", store.RoleMember, "conflict"}, // one email, one team
	}
	for _, m := range members {
		f.refused(t, "member "+strconv.Quote(m.email)+" "+m.role, m.field, func() error {
			_, err := f.st.AddMember(ctx, actor, m.team, m.email, m.role)
			return err
		})
	}
	f.refused(t, "long key name", "name", func() error {
		_, err := f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, strings.Repeat("k", 101))
		return err
	})
	m := must(f.st.AddMember(ctx, actor, f.team.ID, "Bob@Example.com", store.RoleOwner))(t)
	if m.Email != "bob@example.com" || m.Role != store.RoleOwner || m.Status != store.StatusActive {
		t.Errorf("AddMember = %+v, want lower-cased active owner", m)
	}
}

// TestRouteUpstreamOutboundGuard: without the deployment's guard a store
// refuses loopback and private upstreams; with one, what OUTBOUND_ALLOW lists
// is saved, and the gateway's own listeners are refused even when listed.
func TestRouteUpstreamOutboundGuard(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	add := func(st *store.Store, upstream string) func() error {
		return func() error {
			_, err := st.AddRoute(ctx, actor, store.RouteSpec{TeamID: f.team.ID, Prefix: "/local", UpstreamURL: upstream, Dialect: "generic"})
			return err
		}
	}
	bare := store.New(f.pool)
	for _, u := range []string{"http://127.0.0.1:8000", "http://10.0.0.5:8000", "http://localhost:8000"} {
		f.refused(t, "Default"+strconv.Quote(u), "upstream", add(bare, u))
		if err := add(bare, u)(); err == nil || !strings.Contains(err.Error(), "OUTBOUND_ALLOW") {
			t.Errorf("%s: %v, want the refusal to name OUTBOUND_ALLOW", u, err)
		}
	}
	allow, err := netguard.ParseAllow("10.0.0.0/8,127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	guard := netguard.New(netguard.Options{Allow: allow})
	guard.Register(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, &net.TCPAddr{IP: net.IPv4zero, Port: 9090})
	allowed := store.New(f.pool).WithOutbound(guard)
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:9090/metrics", "http://localhost:9090"} {
		f.refused(t, "Own"+strconv.Quote(u), "upstream", add(allowed, u))
	}
	if err := add(allowed, "http://10.0.0.5:8000")(); err != nil {
		t.Fatalf("an allow-listed private upstream: %v", err)
	}
}

func TestRouteValidation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	generic := func(prefix, upstream string) store.RouteSpec {
		return store.RouteSpec{TeamID: f.team.ID, Prefix: prefix, UpstreamURL: upstream, Dialect: "generic"}
	}
	withCred := func(header, env, format string) store.RouteSpec {
		s := generic("/cred", "http://127.0.0.1:8081/v1")
		s.CredentialHeader, s.CredentialEnv, s.CredentialFormat = header, env, format
		return s
	}
	with := func(s store.RouteSpec, edit func(*store.RouteSpec)) store.RouteSpec { edit(&s); return s }
	preset := func(name, prefix, env string) store.RouteSpec {
		return store.RouteSpec{TeamID: f.team.ID, Preset: name, Prefix: prefix, CredentialEnv: env}
	}
	tests := []struct {
		name  string
		spec  store.RouteSpec
		field string // "" means the route is saved
	}{
		{"GenericLoopback", generic("/local", "http://127.0.0.1:9999"), ""},
		{"GenericIPv6Loopback", generic("/v6", "http://[::1]:8080/base"), ""},
		{"NestedPrefix", generic("/team/x.y_z-1", "https://203.0.113.9"), ""},
		{"NearReservedPrefix", generic("/consoles", "http://127.0.0.1"), ""},
		{"CredentialCustom", withCred("X-Custom-Auth", "TOLLGATE_CREDENTIAL_GROQ", "Token {}"), ""},
		{"CredentialEnvCloudToken", withCred("x-api-key", "AWS_SECRET_ACCESS_KEY", "{}"), "credential_env"},
		{"CredentialEnvOtherKey", withCred("x-api-key", "MY_PROVIDER_API_KEY", "{}"), "credential_env"},
		{"CredentialEnvBarePrefix", withCred("x-api-key", "TOLLGATE_CREDENTIAL_", "{}"), "credential_env"},
		{"PresetAnthropic", preset("anthropic", "", ""), ""},
		{"PresetOpenAIOverrides", with(preset("openai", "/oai", ""), func(s *store.RouteSpec) { s.UpstreamURL = "http://127.0.0.1:7" }), ""},
		{"PresetUnknown", preset("gemini", "", ""), "preset"},
		{"DialectUnknown", with(generic("/x", "http://127.0.0.1"), func(s *store.RouteSpec) { s.Dialect = "grpc" }), "dialect"},
		{"FailModeUnknown", with(generic("/x", "http://127.0.0.1"), func(s *store.RouteSpec) { s.FailMode = "maybe" }), "fail_mode"},
		{"HeaderSpace", withCred("x api key", "TOLLGATE_CREDENTIAL_X", "{}"), "header"},
		{"HeaderCRLF", withCred("x-api-key\r\nx-evil", "TOLLGATE_CREDENTIAL_X", "{}"), "header"},
		{"HeaderColon", withCred("x-api-key:", "TOLLGATE_CREDENTIAL_X", "{}"), "header"},
		{"CredentialEnvDatabaseURL", withCred("x-api-key", "DATABASE_URL", "{}"), "credential_env"},
		{"CredentialEnvSessionKey", withCred("x-api-key", "SESSION_KEY", "{}"), "credential_env"},
		{"CredentialEnvSetupToken", withCred("x-api-key", "SETUP_TOKEN", "{}"), "credential_env"},
		{"CredentialEnvLowerCase", withCred("x-api-key", "my_api_key", "{}"), "credential_env"},
		{"CredentialEnvMissing", withCred("x-api-key", "", "{}"), "credential_env"},
		{"CredentialEnvWithoutHeader", with(withCred("", "DATABASE_URL", ""), func(s *store.RouteSpec) { s.Prefix = "/nohdr" }), "credential_env"},
		{"PresetCredentialEnvDatabaseURL", preset("anthropic", "/a2", "DATABASE_URL"), "credential_env"},
		{"FormatNoPlaceholder", withCred("Authorization", "TOLLGATE_CREDENTIAL_X", "Bearer"), "format"},
		{"FormatTwoPlaceholders", withCred("Authorization", "TOLLGATE_CREDENTIAL_X", "{} {}"), "format"},
	}
	add := func(spec store.RouteSpec) func() error {
		return func() error { _, err := f.st.AddRoute(ctx, actor, spec); return err }
	}
	for _, p := range []string{"/console", "/console/api", "/static", "/api", "/api/v1", "/healthz", "/readyz", "/metrics/x",
		"local", "/", "/local/", "/Local", "/a/..", "/a%2fb", "/a//b"} {
		f.refused(t, "Prefix"+strconv.Quote(p), "prefix", add(generic(p, "http://127.0.0.1")))
	}
	for _, u := range []string{"127.0.0.1:8080", "ftp://127.0.0.1", "http:///v1", "http://user:pass@127.0.0.1",
		"https://token@10.0.0.5", "http://127.0.0.1/?key=1", "http://127.0.0.1/#f",
		"http://169.254.169.254", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]",
		"http://[::ffff:a9fe:a9fe]/", "http://2852039166/", "http://0xa9fea9fe/", "http://0251.0376.0251.0376/",
		"http://169.254.43518/", "http://169.254.169.254./", "http://[fd00:ec2::254]/", "http://100.100.100.200/",
		"http://[fe80::1]/", "http://[fe80::1%25eth0]/", "http://0.0.0.0:8080", "http://[::]/", "http://0/",
		"http://224.0.0.1/", "http://255.255.255.255/", "http://10.1.2.3/", "http://[fd12::1]/", "http://100.64.0.1/"} {
		f.refused(t, "Upstream"+strconv.Quote(u), "upstream", add(generic("/x", u)))
	}
	for _, tt := range tests {
		if tt.field != "" {
			f.refused(t, tt.name, tt.field, add(tt.spec))
			continue
		}
		var r store.Route
		entries := f.audited(t, func() { r = must(f.st.AddRoute(ctx, actor, tt.spec))(t) })
		if actions(entries) != "route.add "+r.Prefix || r.TeamID != f.team.ID || r.FailMode == "" || r.CredentialFormat == "" {
			t.Errorf("%s: route %+v audited %q", tt.name, r, actions(entries))
		}
	}

	routes := must(f.st.Routes(ctx, f.team.ID))(t)
	byPrefix := map[string]store.Route{}
	for _, r := range routes {
		r.ID, r.TeamID, r.CreatedAt = 0, 0, time.Time{}
		byPrefix[r.Prefix] = r
	}
	for _, want := range []store.Route{
		{Prefix: "/anthropic", UpstreamURL: "https://api.anthropic.com", Dialect: "anthropic",
			CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY", CredentialFormat: "{}", FailMode: "closed", MaxAttempts: 2},
		{Prefix: "/oai", UpstreamURL: "http://127.0.0.1:7", Dialect: "openai",
			CredentialHeader: "Authorization", CredentialEnv: "OPENAI_API_KEY", CredentialFormat: "Bearer {}", FailMode: "closed", MaxAttempts: 2},
		{Prefix: "/local", UpstreamURL: "http://127.0.0.1:9999", Dialect: "generic", CredentialFormat: "{}", FailMode: "closed", MaxAttempts: 2},
	} {
		if got := byPrefix[want.Prefix]; !reflect.DeepEqual(got, want) {
			t.Errorf("route %s = %+v, want %+v", want.Prefix, got, want)
		}
	}

	// A prefix is unique within a team, not across teams.
	f.refused(t, "duplicate prefix", "conflict", func() error {
		_, err := f.st.AddRoute(ctx, actor, generic("/local", "http://127.0.0.2"))
		return err
	})
	other := must(f.st.CreateTeam(ctx, actor, "other"))(t)
	must(f.st.AddRoute(ctx, actor, with(generic("/local", "http://127.0.0.2"), func(s *store.RouteSpec) { s.TeamID = other.ID })))(t)
	if got := len(must(f.st.Routes(ctx, f.team.ID))(t)); got != len(routes) {
		t.Errorf("team has %d routes after the conflict and the other team's route, want %d", got, len(routes))
	}
}

func TestEveryWriteAuditsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	var team store.Team
	// once runs write, which returns the target and team it changed, and checks
	// that exactly one audit row names them.
	once := func(action string, write func() (string, int64)) {
		t.Helper()
		var target string
		var teamID int64
		entries := f.audited(t, func() { target, teamID = write() })
		if len(entries) != 1 {
			t.Errorf("%s: audited %q, want exactly one row", action, actions(entries))
			return
		}
		e := entries[0]
		if e.Action != action || e.Target != target || e.Actor != string(actor) ||
			e.TeamID == nil || *e.TeamID != teamID || e.After == nil || time.Since(e.At) > time.Minute {
			t.Errorf("audit row = %+v, want %s on %s by %s in team %d", e, action, target, actor, teamID)
		}
	}
	once("team.create", func() (string, int64) {
		team = must(f.st.CreateTeam(ctx, actor, "beta"))(t)
		return "beta", team.ID
	})
	var bob store.Member
	once("member.add", func() (string, int64) {
		bob = must(f.st.AddMember(ctx, actor, team.ID, "Bob@example.com", store.RoleMember))(t)
		return "bob@example.com", team.ID
	})
	for _, status := range []string{store.StatusDisabled, store.StatusActive} {
		once("member.status", func() (string, int64) {
			must(f.st.SetMemberStatus(ctx, actor, team.ID, bob.ID, status))(t)
			return "bob@example.com", team.ID
		})
	}
	once("route.add", func() (string, int64) {
		must(f.st.AddRoute(ctx, actor, store.RouteSpec{TeamID: team.ID, Preset: "openai", UpstreamURL: "http://127.0.0.1:1"}))(t)
		return "/openai", team.ID
	})
	var key store.IssuedKey
	once("key.issue", func() (string, int64) {
		key = must(f.st.IssueKey(ctx, actor, team.ID, bob.ID, "ci"))(t)
		return key.ID, team.ID
	})
	once("key.revoke", func() (string, int64) {
		must(f.st.RevokeKey(ctx, actor, team.ID, key.ID))(t)
		return key.ID, team.ID
	})
	if got := must(f.st.Audit(ctx, &team.ID, 100))(t); len(got) != 7 || got[0].Action != "key.revoke" {
		t.Errorf("Audit(team beta) = %q, want its 7 rows, newest first", actions(got))
	}
}
