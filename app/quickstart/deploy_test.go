package quickstart_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/app/cli"
	"github.com/tollgate/tollgate/app/config"
)

// The deploy files cannot be exercised here (no Docker engine, no Fly
// account), so these tests hold them to what the README and the code promise:
// they parse, and every port, command, flag and variable they name exists.

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// usage is `tollgate help` plus a command's flags, to check the files name
// real commands and flags.
func usage(t *testing.T, args ...string) string {
	t.Helper()
	var out strings.Builder
	err := cli.Run(context.Background(), args, cli.Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
	if u, ok := errors.AsType[*cli.UsageError](err); ok {
		return u.Error()
	}
	if err != nil {
		t.Fatalf("tollgate %v: %v", args, err)
	}
	return out.String()
}

func TestFlyToml(t *testing.T) {
	t.Parallel()
	doc, err := parseTOML(readRepoFile(t, "fly.toml"))
	if err != nil {
		t.Fatalf("fly.toml: %v", err)
	}
	get := func(path string) any {
		t.Helper()
		v, ok := lookup(doc, path)
		if !ok {
			t.Errorf("fly.toml has no %s", path)
		}
		return v
	}
	if app, _ := get("app").(string); app == "" {
		t.Error("fly.toml: app is empty")
	}
	if df, _ := get("build.dockerfile").(string); df != "Dockerfile" {
		t.Errorf("build.dockerfile = %q, want Dockerfile", df)
	}
	release, _ := get("deploy.release_command").(string)
	if release != "migrate" || !strings.Contains(usage(t, "help"), "\n  migrate ") {
		t.Errorf("deploy.release_command = %q, want migrate, a tollgate command (the image's entrypoint is tollgate)", release)
	}

	// The [env] block, plus what Fly and the README's secrets add, is a
	// configuration that loads and listens where the service sends traffic.
	envBlock, _ := get("env").(map[string]any)
	vars := map[string]string{
		"FLY_APP_NAME": "acme-gw",
		"DATABASE_URL": "postgres://acme:pw@acme-db.flycast:5432/acme?sslmode=disable",
		"REDIS_URL":    "redis://default:pw@fly-acme-redis.upstash.io:6379",
	}
	for k, v := range envBlock {
		s, ok := v.(string)
		if !ok {
			t.Errorf("[env] %s = %v: Fly passes strings; quote it", k, v)
		}
		vars[k] = s
	}
	cfg, err := config.Load(func(name string) string { return vars[name] })
	if err != nil {
		t.Fatalf("fly.toml [env] with Fly's variables does not load:\n%v", err)
	}
	port, _ := get("http_service.internal_port").(int64)
	if cfg.ListenAddr != ":"+strconv.FormatInt(port, 10) {
		t.Errorf("the gateway listens on %s, http_service.internal_port is %d", cfg.ListenAddr, port)
	}
	if cfg.PublicURL != "https://acme-gw.fly.dev" {
		t.Errorf("PUBLIC_URL on Fly = %s, want https://acme-gw.fly.dev", cfg.PublicURL)
	}
	if fs, _ := get("http_service.force_https").(bool); !fs {
		t.Error("http_service.force_https is not true: console cookies are Secure")
	}

	checks, _ := get("http_service.checks").([]map[string]any)
	if len(checks) == 0 || checks[0]["path"] != "/healthz" || checks[0]["method"] != "GET" {
		t.Errorf("http_service.checks = %v, want a GET /healthz check", checks)
	}
	conc, _ := get("http_service.concurrency").(map[string]any)
	soft, _ := conc["soft_limit"].(int64)
	hard, _ := conc["hard_limit"].(int64)
	if conc["type"] != "requests" || soft <= 0 || hard < soft {
		t.Errorf("http_service.concurrency = %v, want type requests and 0 < soft_limit <= hard_limit", conc)
	}
	if p, _ := get("metrics.port").(int64); p != 9090 {
		t.Errorf("metrics.port = %d, want 9090 (the admin listener's /metrics)", p)
	}
	if p, _ := get("metrics.path").(string); p != "/metrics" {
		t.Errorf("metrics.path = %q, want /metrics", p)
	}
	// The ledger spool outlives a machine: it is on the volume.
	dest, _ := get("mounts.destination").(string)
	if src, _ := get("mounts.source").(string); src == "" || dest == "" || !strings.HasPrefix(cfg.LedgerSpoolDir, strings.TrimSuffix(dest, "/")+"/") {
		t.Errorf("LEDGER_SPOOL_DIR = %s, [mounts] = %q on %q: want the spool on a Fly volume", cfg.LedgerSpoolDir, src, dest)
	}
	// Fly must wait for the drain before SIGKILL.
	if kt, _ := get("kill_timeout").(string); kt == "" || !durationAtLeast(kt, (cfg.DrainDelay+cfg.ShutdownTimeout).Seconds()) {
		t.Errorf("kill_timeout = %q, want at least DRAIN_DELAY + SHUTDOWN_TIMEOUT (%s)", kt, cfg.DrainDelay+cfg.ShutdownTimeout)
	}
}

func durationAtLeast(s string, seconds float64) bool {
	n, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	return err == nil && strings.HasSuffix(s, "s") && n >= seconds
}

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Command     []string          `yaml:"command"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Volumes     []string       `yaml:"volumes"`
		Healthcheck map[string]any `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestDockerCompose(t *testing.T) {
	t.Parallel()
	var f composeFile
	dec := yaml.NewDecoder(strings.NewReader(readRepoFile(t, "docker-compose.yml")))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "redis", "mock", "gateway"} {
		if _, ok := f.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no %s service", name)
		}
	}
	gw, mock := f.Services["gateway"], f.Services["mock"]
	if gw.Build == nil || mock.Build == nil {
		t.Error("gateway and mock must be built from the Dockerfile")
	}

	// The gateway's environment loads, with ${VAR:-} taken as empty.
	vars := map[string]string{}
	for k, v := range gw.Environment {
		if strings.HasPrefix(v, "${") {
			v = ""
		}
		vars[k] = v
	}
	cfg, err := config.Load(func(name string) string { return vars[name] })
	if err != nil {
		t.Fatalf("the gateway's compose environment does not load:\n%v", err)
	}
	if !slices.Contains(gw.Ports, "127.0.0.1:8080:8080") || cfg.ListenAddr != "0.0.0.0:8080" || cfg.PublicURL != "http://localhost:8080" {
		t.Errorf("gateway ports %v, listen %s, public URL %s: want localhost:8080 reaching the gateway on 0.0.0.0:8080",
			gw.Ports, cfg.ListenAddr, cfg.PublicURL)
	}
	for _, dep := range []struct{ service, hostIn string }{{"postgres", cfg.DatabaseURL}, {"redis", cfg.RedisURL}} {
		u, err := url.Parse(dep.hostIn)
		if err != nil || u.Hostname() != dep.service {
			t.Errorf("the gateway reaches %s at %q, want host %s", dep.service, dep.hostIn, dep.service)
		}
		if gw.DependsOn[dep.service].Condition != "service_healthy" || f.Services[dep.service].Healthcheck == nil {
			t.Errorf("gateway does not wait for a healthy %s", dep.service)
		}
	}

	// dev --mock-url points at the mock service's listener, with its key.
	if len(gw.Command) < 3 || gw.Command[0] != "dev" || gw.Command[1] != "--mock-url" {
		t.Fatalf("gateway command = %q, want dev --mock-url <mock>", gw.Command)
	}
	if !strings.Contains(usage(t, "dev", "-h"), "--mock-url") {
		t.Error("tollgate dev has no --mock-url flag")
	}
	mockURL, err := url.Parse(gw.Command[2])
	if err != nil || mockURL.Hostname() != "mock" {
		t.Errorf("--mock-url %q does not name the mock service", gw.Command[2])
	}
	if !slices.Equal(mock.Entrypoint, []string{"/usr/local/bin/mockprovider"}) {
		t.Errorf("mock entrypoint = %q, want the image's mockprovider", mock.Entrypoint)
	}
	flags := flagValues(mock.Command)
	if flags["--addr"] != "0.0.0.0:"+mockURL.Port() {
		t.Errorf("mock listens on %q, the gateway calls port %s", flags["--addr"], mockURL.Port())
	}
	key := gw.Environment["TOLLGATE_CREDENTIAL_MOCK"]
	if key == "" || flags["--anthropic-key"] != key || flags["--openai-key"] != key {
		t.Errorf("the gateway injects %q, the mock expects %q / %q", key, flags["--anthropic-key"], flags["--openai-key"])
	}
	mainGo := readRepoFile(t, "cmd/mockprovider/main.go")
	for name := range flags {
		if !strings.Contains(mainGo, `"`+strings.TrimPrefix(name, "--")+`"`) {
			t.Errorf("mockprovider has no %s flag", name)
		}
	}
}

func flagValues(args []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		m[args[i]] = args[i+1]
	}
	return m
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	var stages [][]string // instructions per stage, continuation lines joined
	var cur string
	for _, line := range strings.Split(readRepoFile(t, "Dockerfile"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cur = cur+line, ""
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %q before the first FROM", line)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a build stage and a runtime stage", len(stages))
	}
	build, final := strings.Join(stages[0], "\n"), stages[len(stages)-1]

	goMod := readRepoFile(t, "go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	if goVersion == nil || !strings.Contains(stages[0][0], "golang:"+goVersion[1]) {
		t.Errorf("build stage %q does not use go.mod's Go %v", stages[0][0], goVersion)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/tollgate", "./cmd/mockprovider"} {
		if !strings.Contains(build, want) {
			t.Errorf("build stage does not say %s", want)
		}
	}
	if !strings.Contains(final[0], "distroless/static") || !strings.HasSuffix(final[0], ":nonroot") {
		t.Errorf("runtime stage %q, want distroless static :nonroot", final[0])
	}
	var user, entrypoint, expose string
	env := map[string]string{}
	for _, ins := range final[1:] {
		switch op, arg, _ := strings.Cut(ins, " "); op {
		case "COPY":
			// Only binaries built in an earlier stage: no sources, no tools.
			if !strings.HasPrefix(arg, "--from=build ") || strings.Contains(arg, " . ") {
				t.Errorf("runtime stage copies %q, want only binaries from the build stage", arg)
			}
		case "RUN", "ADD":
			t.Errorf("runtime stage runs %q; it has no shell and needs nothing installed", ins)
		case "USER":
			user = arg
		case "ENTRYPOINT":
			entrypoint = arg
		case "EXPOSE":
			expose = arg
		case "ENV":
			k, v, _ := strings.Cut(arg, "=")
			env[k] = v
		}
	}
	if !strings.HasPrefix(user, "nonroot") {
		t.Errorf("runtime USER = %q, want nonroot", user)
	}
	if entrypoint != `["/usr/local/bin/tollgate"]` {
		t.Errorf("ENTRYPOINT = %s, want the tollgate binary (fly's release_command and compose's command are its arguments)", entrypoint)
	}
	if expose != "8080 9090" {
		t.Errorf("EXPOSE %s, want 8080 (fly.toml internal_port) and 9090 (the admin listener)", expose)
	}
	// Fly's [metrics] scrape reaches the admin listener over the private network.
	if env["ADMIN_ADDR"] != "0.0.0.0:9090" {
		t.Errorf("ENV ADMIN_ADDR=%s, want 0.0.0.0:9090: fly.toml's [metrics] port on every interface", env["ADMIN_ADDR"])
	}
	ignore := readRepoFile(t, ".dockerignore")
	if !slices.Contains(strings.Fields(ignore), ".git") {
		t.Error(".dockerignore does not keep .git out of the build context")
	}
}

// parseTOML reads the subset of TOML that fly.toml uses: comments, [table],
// [[array.of.tables]], and key = "string" | integer | true/false | ["strings"].
// Anything else is an error, so a typo cannot pass silently. (No TOML module
// is in go.mod, and this test must not add one.)
func parseTOML(src string) (map[string]any, error) {
	root := map[string]any{}
	cur := root
	for n, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(stripComment(raw))
		if line == "" {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, raw, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "[["):
			if !strings.HasSuffix(line, "]]") {
				return nil, fail("unclosed [[")
			}
			path := strings.Split(strings.TrimSpace(line[2:len(line)-2]), ".")
			parent, err := walk(root, path[:len(path)-1])
			if err != nil {
				return nil, fail("%v", err)
			}
			last := path[len(path)-1]
			arr, _ := parent[last].([]map[string]any)
			if _, exists := parent[last]; exists && arr == nil {
				return nil, fail("%s is not an array of tables", last)
			}
			cur = map[string]any{}
			parent[last] = append(arr, cur)
		case strings.HasPrefix(line, "["):
			if !strings.HasSuffix(line, "]") {
				return nil, fail("unclosed [")
			}
			t, err := walk(root, strings.Split(strings.TrimSpace(line[1:len(line)-1]), "."))
			if err != nil {
				return nil, fail("%v", err)
			}
			cur = t
		default:
			key, val, ok := strings.Cut(line, "=")
			key = strings.TrimSpace(key)
			if !ok || !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(key) {
				return nil, fail("want key = value")
			}
			if _, dup := cur[key]; dup {
				return nil, fail("duplicate key %s", key)
			}
			v, err := tomlValue(strings.TrimSpace(val))
			if err != nil {
				return nil, fail("%v", err)
			}
			cur[key] = v
		}
	}
	return root, nil
}

// walk descends into (creating) the tables of path; an array of tables yields
// its last element, as TOML does.
func walk(t map[string]any, path []string) (map[string]any, error) {
	for _, k := range path {
		if k == "" {
			return nil, errors.New("empty table name")
		}
		switch v := t[k].(type) {
		case nil:
			next := map[string]any{}
			t[k] = next
			t = next
		case map[string]any:
			t = v
		case []map[string]any:
			t = v[len(v)-1]
		default:
			return nil, fmt.Errorf("%s is a value, not a table", k)
		}
	}
	return t, nil
}

func tomlValue(s string) (any, error) {
	switch {
	case s == "true" || s == "false":
		return s == "true", nil
	case strings.HasPrefix(s, `"`):
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("bad string %s", s)
		}
		return v, nil
	case strings.HasPrefix(s, "["):
		if !strings.HasSuffix(s, "]") {
			return nil, errors.New("arrays must close on the same line")
		}
		var out []any
		for item := range strings.SplitSeq(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			v, err := tomlValue(item)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("unsupported value %s", s)
	}
	return n, nil
}

// stripComment drops a # comment that is not inside a string.
func stripComment(line string) string {
	in := false
	for i, r := range line {
		switch {
		case r == '"' && (i == 0 || line[i-1] != '\\'):
			in = !in
		case r == '#' && !in:
			return line[:i]
		}
	}
	return line
}

func lookup(doc map[string]any, path string) (any, bool) {
	var v any = doc
	for k := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
