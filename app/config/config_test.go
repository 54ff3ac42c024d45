package config_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/config"
)

// env is a map-backed getenv: tests never touch the process environment.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// problems splits a Load error into its joined parts.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range joined.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got, err := config.Load(env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := config.Config{
		DatabaseURL:              "postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable",
		ListenAddr:               "127.0.0.1:8080",
		PublicURL:                "http://127.0.0.1:8080",
		ConfigPollInterval:       30 * time.Second,
		KeyRotationGrace:         24 * time.Hour,
		MaxRequestBodyBytes:      8 << 20,
		MaxRequestHeaderBytes:    64 << 10,
		UpstreamFirstByteTimeout: 10 * time.Minute,
		StreamIdleTimeout:        2 * time.Minute,
		ShutdownTimeout:          30 * time.Second,
		LogLevel:                 slog.LevelInfo,
		RedisKeyPrefix:           "tg:",
		RedisTimeout:             150 * time.Millisecond,
		Replicas:                 1,
		ConcurrencyLease:         15 * time.Minute,
	}
	if got != want {
		t.Errorf("Load(empty) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		vars  map[string]string
		check func(config.Config) bool
	}{
		{"PortUsedWhenListenAddrUnset", map[string]string{"PORT": "9000"},
			func(c config.Config) bool { return c.ListenAddr == ":9000" && c.PublicURL == "http://localhost:9000" }},
		{"ListenAddrWinsOverPort", map[string]string{"PORT": "9000", "LISTEN_ADDR": "127.0.0.1:7000"},
			func(c config.Config) bool {
				return c.ListenAddr == "127.0.0.1:7000" && c.PublicURL == "http://127.0.0.1:7000"
			}},
		{"WildcardIPv4PublicURLIsLocalhost", map[string]string{"LISTEN_ADDR": "0.0.0.0:8081"},
			func(c config.Config) bool { return c.PublicURL == "http://localhost:8081" }},
		{"WildcardIPv6PublicURLIsLocalhost", map[string]string{"LISTEN_ADDR": "[::]:8082"},
			func(c config.Config) bool { return c.PublicURL == "http://localhost:8082" }},
		{"IPv6ListenAddrBracketedInPublicURL", map[string]string{"LISTEN_ADDR": "[::1]:8083"},
			func(c config.Config) bool { return c.PublicURL == "http://[::1]:8083" }},
		{"PublicURLHonoured", map[string]string{"PUBLIC_URL": "https://gw.example.com"},
			func(c config.Config) bool { return c.PublicURL == "https://gw.example.com" }},
		{"PostgresqlScheme", map[string]string{"DATABASE_URL": "postgresql://u@db/x"},
			func(c config.Config) bool { return c.DatabaseURL == "postgresql://u@db/x" }},
		{"Durations", map[string]string{"CONFIG_POLL_INTERVAL": "1s", "KEY_ROTATION_GRACE": "0s", "SHUTDOWN_TIMEOUT": "0s",
			"UPSTREAM_FIRST_BYTE_TIMEOUT": "90s", "STREAM_IDLE_TIMEOUT": "5m"},
			func(c config.Config) bool {
				return c.ConfigPollInterval == time.Second && c.KeyRotationGrace == 0 && c.ShutdownTimeout == 0 &&
					c.UpstreamFirstByteTimeout == 90*time.Second && c.StreamIdleTimeout == 5*time.Minute
			}},
		{"SizesAtMinimum", map[string]string{"MAX_REQUEST_BODY_BYTES": "1024", "MAX_REQUEST_HEADER_BYTES": "4096"},
			func(c config.Config) bool { return c.MaxRequestBodyBytes == 1024 && c.MaxRequestHeaderBytes == 4096 }},
		{"LogLevelDebug", map[string]string{"LOG_LEVEL": "debug"},
			func(c config.Config) bool { return c.LogLevel == slog.LevelDebug }},
		{"LogLevelUpperCaseError", map[string]string{"LOG_LEVEL": "ERROR"},
			func(c config.Config) bool { return c.LogLevel == slog.LevelError }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(tt.vars))
			if err != nil {
				t.Fatalf("Load(%v): %v", tt.vars, err)
			}
			if !tt.check(c) {
				t.Errorf("Load(%v) = %+v", tt.vars, c)
			}
		})
	}
}

func TestLoadBadValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		wantIn      string // a hint at what would be valid
	}{
		{"DATABASE_URL", "mysql://root@db/tollgate", "postgres://"},
		{"DATABASE_URL", "host=db user=postgres", "postgres://"},
		{"LISTEN_ADDR", "localhost", "port"},
		{"LISTEN_ADDR", ":0", "1 to 65535"},
		{"LISTEN_ADDR", ":65536", "1 to 65535"},
		{"LISTEN_ADDR", ":http", "1 to 65535"},
		{"PUBLIC_URL", "gw.example.com", "http://"},
		{"PUBLIC_URL", "ftp://gw.example.com", "http://"},
		{"PUBLIC_URL", "https://", "http://"},
		{"LOG_LEVEL", "loud", "debug, info, warn or error"},
		{"REDIS_URL", "localhost:6379", "redis://"},
		{"REDIS_URL", "http://localhost:6379", "redis://"},
		{"REDIS_KEY_PREFIX", "tg:{x}:", "hash tag"},
		{"REDIS_TIMEOUT", "0s", "at least 1ms"},
		{"GATEWAY_REPLICAS", "0", "at least 1"},
		{"CONCURRENCY_LEASE", "100ms", "at least 1s"},
		{"CONFIG_POLL_INTERVAL", "soon", "duration"},
		{"CONFIG_POLL_INTERVAL", "500ms", "at least 1s"},
		{"CONFIG_POLL_INTERVAL", "30", "duration"},
		{"KEY_ROTATION_GRACE", "-1h", "at least 0s"},
		{"UPSTREAM_FIRST_BYTE_TIMEOUT", "10", "duration"},
		{"UPSTREAM_FIRST_BYTE_TIMEOUT", "999ms", "at least 1s"},
		{"STREAM_IDLE_TIMEOUT", "0s", "at least 1s"},
		{"SHUTDOWN_TIMEOUT", "-5s", "at least 0s"},
		{"MAX_REQUEST_BODY_BYTES", "-1", "at least 1024"},
		{"MAX_REQUEST_BODY_BYTES", "1023", "at least 1024"},
		{"MAX_REQUEST_BODY_BYTES", "8MB", "whole number"},
		{"MAX_REQUEST_HEADER_BYTES", "-4096", "at least 4096"},
		{"MAX_REQUEST_HEADER_BYTES", "1.5", "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			got := problems(t, loadErr(map[string]string{tt.name: tt.value}))
			if len(got) != 1 {
				t.Fatalf("got %d problems, want 1: %q", len(got), got)
			}
			msg := got[0]
			if !strings.HasPrefix(msg, tt.name+" ") {
				t.Errorf("problem %q does not start with the variable %s", msg, tt.name)
			}
			if !strings.Contains(msg, tt.wantIn) {
				t.Errorf("problem %q does not say %q", msg, tt.wantIn)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("problem %q spans lines", msg)
			}
		})
	}
}

func loadErr(vars map[string]string) error {
	_, err := config.Load(env(vars))
	return err
}

// A bad PORT is what the operator set; naming only LISTEN_ADDR would send them
// looking for a variable they never set.
func TestLoadBadPortNamesPort(t *testing.T) {
	t.Parallel()
	got := problems(t, loadErr(map[string]string{"PORT": "eighty"}))
	if len(got) != 1 || !strings.Contains(got[0], "PORT") || !strings.Contains(got[0], "eighty") {
		t.Errorf("problems = %q, want one naming PORT and its value", got)
	}
}

// The database URL may hold a password: its problem must not echo it.
func TestLoadBadDatabaseURLHidesPassword(t *testing.T) {
	t.Parallel()
	err := loadErr(map[string]string{"DATABASE_URL": "mysql://root:hunter2@db/tollgate"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Load error = %v, want one that does not contain the password", err)
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"DATABASE_URL":             "mysql://db/x",
		"LISTEN_ADDR":              "nowhere",
		"PUBLIC_URL":               "gw",
		"LOG_LEVEL":                "chatty",
		"CONFIG_POLL_INTERVAL":     "often",
		"KEY_ROTATION_GRACE":       "-1s",
		"MAX_REQUEST_BODY_BYTES":   "-10",
		"MAX_REQUEST_HEADER_BYTES": "10",
		"STREAM_IDLE_TIMEOUT":      "1ms",
	}
	c, err := config.Load(env(vars))
	if c != (config.Config{}) {
		t.Errorf("Load returned a partial config %+v alongside its error", c)
	}
	got := problems(t, err)
	if len(got) != len(vars) {
		t.Errorf("got %d problems, want %d: %q", len(got), len(vars), got)
	}
	for name := range vars {
		n := 0
		for _, p := range got {
			if strings.HasPrefix(p, name+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d problems name %s, want 1; all: %q", n, name, got)
		}
	}
}
