package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/grant"
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
		MaxInflatedBodyBytes:     32 << 20,
		ReadHeaderTimeout:        10 * time.Second,
		BodyReadTimeout:          time.Minute,
		MaxResponseBytes:         128 << 20,
		MaxStreamBytes:           128 << 20,
		RequestTimeout:           time.Hour,
		MaxInFlight:              4096,
		MemberMaxInFlight:        256,
		MemberQueueDepth:         64,
		MemberQueueWait:          2 * time.Second,
		FairQueueWait:            3 * time.Second,
		MaxRequestHeaderBytes:    64 << 10,
		MaxResponseHeaderBytes:   64 << 10,
		UpstreamFirstByteTimeout: 10 * time.Minute,
		StreamIdleTimeout:        2 * time.Minute,
		ShutdownTimeout:          30 * time.Second,
		LedgerSpoolDir:           "/tmp/tollgate-ledger",
		LedgerSpoolMaxRows:       100000,
		LogLevel:                 slog.LevelInfo,
		RedisKeyPrefix:           "tg:",
		RedisTimeout:             time.Second,
		RedisWait:                5 * time.Second,
		RedisPoolSize:            16,
		Replicas:                 1,
		ConcurrencyLease:         15 * time.Minute,
		ProviderRateLimits:       true,
		ProviderLimitWait:        2 * time.Second,
		AdminAddr:                "127.0.0.1:9090",
		DrainDelay:               5 * time.Second,
		LogSampleEvery:           1,
		Tracing:                  config.Tracing{ServiceName: "tollgate"},
		CredentialGrants:         grant.Default(),
	}
	if !reflect.DeepEqual(got, want) {
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
		{"FlyEnvironment", map[string]string{"PORT": "8080", "FLY_APP_NAME": "acme-gw",
			"DATABASE_URL": "postgres://acme:pw@acme-db.flycast:5432/acme?sslmode=disable",
			"REDIS_URL":    "redis://default:pw@fly-acme-redis.upstash.io:6379"},
			func(c config.Config) bool {
				return c.ListenAddr == ":8080" && c.PublicURL == "https://acme-gw.fly.dev" && c.RedisMode() == config.RedisSingle
			}},
		{"PublicURLWinsOverFlyAppName", map[string]string{"FLY_APP_NAME": "acme-gw", "PUBLIC_URL": "https://llm.acme.dev"},
			func(c config.Config) bool { return c.PublicURL == "https://llm.acme.dev" }},
		{"ManagedPostgresRequiresTLS", map[string]string{"DATABASE_URL": "postgresql://u:pw@db.example.com:5432/tollgate?sslmode=require"},
			func(c config.Config) bool { return strings.HasSuffix(c.DatabaseURL, "sslmode=require") }},
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
		{"BoundsOff", map[string]string{"MAX_REQUEST_BODY_BYTES": "0", "MAX_INFLATED_BODY_BYTES": "0", "BODY_READ_TIMEOUT": "0",
			"MAX_RESPONSE_BYTES": "0", "MAX_STREAM_BYTES": "0", "REQUEST_TIMEOUT": "0s", "MAX_IN_FLIGHT": "0",
			"MEMBER_MAX_IN_FLIGHT": "0", "UPSTREAM_FIRST_BYTE_TIMEOUT": "0", "STREAM_IDLE_TIMEOUT": "0s"},
			func(c config.Config) bool {
				return c.MaxRequestBodyBytes == 0 && c.MaxInflatedBodyBytes == 0 && c.BodyReadTimeout == 0 &&
					c.MaxResponseBytes == 0 && c.MaxStreamBytes == 0 && c.RequestTimeout == 0 && c.MaxInFlight == 0 &&
					c.MemberMaxInFlight == 0 && c.UpstreamFirstByteTimeout == 0 && c.StreamIdleTimeout == 0
			}},
		{"Bounds", map[string]string{"MAX_IN_FLIGHT": "100", "MEMBER_MAX_IN_FLIGHT": "4", "MEMBER_QUEUE_DEPTH": "0",
			"MEMBER_QUEUE_WAIT": "250ms", "REQUEST_TIMEOUT": "5m", "MAX_STREAM_BYTES": "1048576", "FAIR_QUEUE_WAIT": "0s"},
			func(c config.Config) bool {
				return c.MaxInFlight == 100 && c.MemberMaxInFlight == 4 && c.MemberQueueDepth == 0 && c.FairQueueWait == 0 &&
					c.MemberQueueWait == 250*time.Millisecond && c.RequestTimeout == 5*time.Minute && c.MaxStreamBytes == 1<<20
			}},
		{"SizesAtMinimum", map[string]string{"MAX_REQUEST_BODY_BYTES": "1024", "MAX_REQUEST_HEADER_BYTES": "4096"},
			func(c config.Config) bool { return c.MaxRequestBodyBytes == 1024 && c.MaxRequestHeaderBytes == 4096 }},
		{"ProviderRateLimitsOff", map[string]string{"PROVIDER_RATE_LIMITS": "false", "PROVIDER_LIMIT_WAIT": "0s"},
			func(c config.Config) bool { return !c.ProviderRateLimits && c.ProviderLimitWait == 0 }},
		{"ProviderLimitWait", map[string]string{"PROVIDER_LIMIT_WAIT": "500ms"},
			func(c config.Config) bool { return c.ProviderRateLimits && c.ProviderLimitWait == 500*time.Millisecond }},
		{"OutboundAllow", map[string]string{"OUTBOUND_ALLOW": "127.0.0.1/32, 10.0.0.0/8,fd00::1"},
			func(c config.Config) bool {
				return fmt.Sprint(c.OutboundAllow) == "[127.0.0.1/32 10.0.0.0/8 fd00::1/128]"
			}},
		{"OutboundAllowNone", map[string]string{},
			func(c config.Config) bool { return c.OutboundAllow == nil }},
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

// TestLoadBadValue: each bad value gets exactly one problem, worded exactly so:
// the variable first, then what would be valid.
func TestLoadBadValue(t *testing.T) {
	t.Parallel()
	const pgForm = "postgres://user:password@host:5432/dbname?sslmode=require"
	const redisForm = "redis://[user:password@]host:port[,host:port...][/db] (rediss:// for TLS)"
	tests := []struct {
		name, value string
		want        string
	}{
		{"DATABASE_URL", "mysql://root@db/tollgate", "DATABASE_URL must be a postgres:// URL such as " + pgForm},
		{"DATABASE_URL", "host=db user=postgres", "DATABASE_URL must be a postgres:// URL such as " + pgForm},
		{"DATABASE_URL", "postgres://u@db:99999/x", "DATABASE_URL must have a port from 1 to 65535 after the host, as in " + pgForm},
		{"DATABASE_URL", "postgres://u@db/x?sslmode=required", `DATABASE_URL sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full, not "required"`},
		{"PORT", "eighty", `PORT must be a port from 1 to 65535, not "eighty"`},
		{"PORT", "0", `PORT must be a port from 1 to 65535, not "0"`},
		{"LISTEN_ADDR", "localhost", `LISTEN_ADDR must be host:port or :port with a port from 1 to 65535, not "localhost"`},
		{"LISTEN_ADDR", ":0", `LISTEN_ADDR must be host:port or :port with a port from 1 to 65535, not ":0"`},
		{"LISTEN_ADDR", ":65536", `LISTEN_ADDR must be host:port or :port with a port from 1 to 65535, not ":65536"`},
		{"LISTEN_ADDR", ":http", `LISTEN_ADDR must be host:port or :port with a port from 1 to 65535, not ":http"`},
		{"PUBLIC_URL", "gw.example.com", `PUBLIC_URL must be an http:// or https:// URL, not "gw.example.com"`},
		{"PUBLIC_URL", "ftp://gw.example.com", `PUBLIC_URL must be an http:// or https:// URL, not "ftp://gw.example.com"`},
		{"PUBLIC_URL", "https://", `PUBLIC_URL must be an http:// or https:// URL, not "https://"`},
		{"LOG_LEVEL", "loud", `LOG_LEVEL must be debug, info, warn or error, not "loud"`},
		{"FAIR_QUEUE_WAIT", "2m", "FAIR_QUEUE_WAIT must be at most 1m (0 turns the waiting room off), not 2m0s"},
		{"REDIS_URL", "localhost:6379", "REDIS_URL must be a URL of the form " + redisForm},
		{"REDIS_URL", "http://localhost:6379", `REDIS_URL must use the redis:// or rediss:// scheme, not "http://", as in ` + redisForm},
		{"REDIS_URL", "redis-sentinel://s1:26379,s2:26379/mymaster", "REDIS_URL must use the redis:// or rediss:// scheme, not redis-sentinel://; say REDIS_CLUSTER=true or REDIS_SENTINEL_MASTER=<name> instead"},
		{"REDIS_URL", "redis://", "REDIS_URL has no host; want " + redisForm},
		{"REDIS_URL", "redis://h:0", `REDIS_URL host "h:0" must have a port from 1 to 65535`},
		{"REDIS_URL", "redis://h:65536", `REDIS_URL host "h:65536" must have a port from 1 to 65535`},
		{"REDIS_URL", "redis://h:port", `REDIS_URL host "h:port" must have a port from 1 to 65535`},
		{"REDIS_URL", "redis://::1:6379", `REDIS_URL host "::1:6379" must be host:port with a port from 1 to 65535 (IPv6 in brackets)`},
		{"REDIS_URL", "redis://h:6379,", "REDIS_URL has an empty host in its host list"},
		{"REDIS_URL", "redis://h:6379/x", `REDIS_URL path must be a database number such as /0, not "/x"`},
		{"REDIS_URL", "redis://h:6379/0?dial_timeout=1", "REDIS_URL must not have ?query parameters; timeouts come from REDIS_TIMEOUT, TLS from the rediss:// scheme and REDIS_TLS_CA_FILE"},
		{"REDIS_URL", "redis://a:6379,b:6379", "REDIS_URL lists 2 hosts; several hosts are Cluster seeds (set REDIS_CLUSTER=true) or Sentinels (set REDIS_SENTINEL_MASTER), a single server takes one host"},
		{"REDIS_URL", "redis://:%zz@h", "REDIS_URL has a badly percent-encoded user or password; encode special characters as %XX"},
		{"REDIS_CLUSTER", "yes", `REDIS_CLUSTER must be true or false, not "yes"`},
		{"REDIS_CLUSTER", "true", "REDIS_CLUSTER needs REDIS_URL, which is empty; set REDIS_URL to " + redisForm + " or unset REDIS_CLUSTER"},
		{"REDIS_SENTINEL_MASTER", "mymaster", "REDIS_SENTINEL_MASTER needs REDIS_URL, which is empty; set REDIS_URL to " + redisForm + " or unset REDIS_SENTINEL_MASTER"},
		{"REDIS_TLS_CA_FILE", "/etc/ssl/ca.pem", "REDIS_TLS_CA_FILE needs REDIS_URL, which is empty; set REDIS_URL to " + redisForm + " or unset REDIS_TLS_CA_FILE"},
		{"REDIS_KEY_PREFIX", "tg:{x}:", "REDIS_KEY_PREFIX must not contain { or }, which would replace the team's Redis Cluster hash tag"},
		{"REDIS_TIMEOUT", "0s", `REDIS_TIMEOUT must be a duration such as 30s or 5m, at least 1ms, not "0s"`},
		{"GATEWAY_REPLICAS", "0", `GATEWAY_REPLICAS must be a whole number of at least 1, not "0"`},
		{"CONCURRENCY_LEASE", "100ms", `CONCURRENCY_LEASE must be a duration such as 30s or 5m, at least 1s, not "100ms"`},
		{"CONFIG_POLL_INTERVAL", "soon", `CONFIG_POLL_INTERVAL must be a duration such as 30s or 5m, at least 1s, not "soon"`},
		{"CONFIG_POLL_INTERVAL", "500ms", `CONFIG_POLL_INTERVAL must be a duration such as 30s or 5m, at least 1s, not "500ms"`},
		{"CONFIG_POLL_INTERVAL", "30", `CONFIG_POLL_INTERVAL must be a duration such as 30s or 5m, at least 1s, not "30"`},
		{"KEY_ROTATION_GRACE", "-1h", `KEY_ROTATION_GRACE must be a duration such as 30s or 5m, at least 0s, not "-1h"`},
		{"UPSTREAM_FIRST_BYTE_TIMEOUT", "10", `UPSTREAM_FIRST_BYTE_TIMEOUT must be 0 (off) or a duration such as 30s or 5m, at least 1s, not "10"`},
		{"UPSTREAM_FIRST_BYTE_TIMEOUT", "999ms", `UPSTREAM_FIRST_BYTE_TIMEOUT must be 0 (off) or a duration such as 30s or 5m, at least 1s, not "999ms"`},
		{"STREAM_IDLE_TIMEOUT", "500ms", `STREAM_IDLE_TIMEOUT must be 0 (off) or a duration such as 30s or 5m, at least 1s, not "500ms"`},
		{"MAX_IN_FLIGHT", "-1", `MAX_IN_FLIGHT must be 0 (off) or a whole number of at least 1, not "-1"`},
		{"PROVIDER_RATE_LIMITS", "off", `PROVIDER_RATE_LIMITS must be true or false, not "off"`},
		{"PROVIDER_LIMIT_WAIT", "2", `PROVIDER_LIMIT_WAIT must be a duration such as 30s or 5m, at least 0s, not "2"`},
		{"PROVIDER_LIMIT_WAIT", "-1s", `PROVIDER_LIMIT_WAIT must be a duration such as 30s or 5m, at least 0s, not "-1s"`},
		{"MEMBER_QUEUE_WAIT", "soon", `MEMBER_QUEUE_WAIT must be a duration such as 30s or 5m, at least 0s, not "soon"`},
		{"MAX_STREAM_BYTES", "100", `MAX_STREAM_BYTES must be 0 (off) or a whole number of at least 1024, not "100"`},
		{"SHUTDOWN_TIMEOUT", "-5s", `SHUTDOWN_TIMEOUT must be a duration such as 30s or 5m, at least 0s, not "-5s"`},
		{"MAX_REQUEST_BODY_BYTES", "-1", `MAX_REQUEST_BODY_BYTES must be 0 (off) or a whole number of at least 1024, not "-1"`},
		{"MAX_REQUEST_BODY_BYTES", "1023", `MAX_REQUEST_BODY_BYTES must be 0 (off) or a whole number of at least 1024, not "1023"`},
		{"MAX_REQUEST_BODY_BYTES", "8MB", `MAX_REQUEST_BODY_BYTES must be 0 (off) or a whole number of at least 1024, not "8MB"`},
		{"MAX_INFLATED_BODY_BYTES", "512", `MAX_INFLATED_BODY_BYTES must be 0 (off) or a whole number of at least 1024, not "512"`},
		{"MAX_REQUEST_HEADER_BYTES", "-4096", `MAX_REQUEST_HEADER_BYTES must be a whole number of at least 4096, not "-4096"`},
		{"OUTBOUND_ALLOW", "10.0.0.0/8,intranet", `OUTBOUND_ALLOW must be comma-separated IP addresses or CIDR prefixes such as 127.0.0.1/32,10.0.0.0/8: "intranet" is not an IP address or CIDR prefix such as 10.0.0.0/8`},
		{"OUTBOUND_ALLOW", "169.254.0.0/16", `OUTBOUND_ALLOW must be comma-separated IP addresses or CIDR prefixes such as 127.0.0.1/32,10.0.0.0/8: "169.254.0.0/16" starts in link-local, metadata, unspecified or multicast space, which the gateway never calls; list private ranges such as 10.0.0.0/8 instead`},
		{"MAX_REQUEST_HEADER_BYTES", "1.5", `MAX_REQUEST_HEADER_BYTES must be a whole number of at least 4096, not "1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			got := problems(t, loadErr(map[string]string{tt.name: tt.value}))
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems = %q\nwant [%q]", got, tt.want)
			}
		})
	}
}

// TestLoadRedisCombinations: the REDIS_* variables that only make sense together.
func TestLoadRedisCombinations(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		vars map[string]string
		want []string
	}{
		{"ClusterWithDatabase", map[string]string{"REDIS_URL": "redis://a:7000,b:7001/3", "REDIS_CLUSTER": "true"},
			[]string{"REDIS_URL must select database 0 (or none) when REDIS_CLUSTER is true: a Redis Cluster has only database 0, not /3"}},
		{"ClusterAndSentinel", map[string]string{"REDIS_URL": "redis://a:7000", "REDIS_CLUSTER": "true", "REDIS_SENTINEL_MASTER": "mymaster"},
			[]string{"REDIS_SENTINEL_MASTER must be empty when REDIS_CLUSTER is true: a deployment is either a Cluster or Sentinel-managed, not both"}},
		{"SentinelPasswordWithoutSentinel", map[string]string{"REDIS_URL": "redis://a:6379", "REDIS_SENTINEL_PASSWORD": "s3cret-sentinel"},
			[]string{"REDIS_SENTINEL_PASSWORD applies only with REDIS_SENTINEL_MASTER; unset it or name the master"}},
		{"CAFileWithoutTLS", map[string]string{"REDIS_URL": "redis://a:6379", "REDIS_TLS_CA_FILE": ca},
			[]string{"REDIS_TLS_CA_FILE needs a rediss:// REDIS_URL; redis:// does not use TLS"}},
		{"CAFileMissing", map[string]string{"REDIS_URL": "rediss://a:6379", "REDIS_TLS_CA_FILE": "/nonexistent/ca.pem"},
			[]string{"REDIS_TLS_CA_FILE must be a readable PEM file of CA certificates: open /nonexistent/ca.pem: no such file or directory"}},
		{"CAFileNotPEM", map[string]string{"REDIS_URL": "rediss://a:6379", "REDIS_TLS_CA_FILE": notPEM},
			[]string{"REDIS_TLS_CA_FILE must be a readable PEM file of CA certificates: " + notPEM + " holds no PEM certificate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := problems(t, loadErr(tt.vars))
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestLoadRedisShapes: every deployment shape REDIS_URL and its companions
// describe, as the client builder sees them.
func TestLoadRedisShapes(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	tests := []struct {
		name string
		vars map[string]string
		mode config.RedisMode
		want config.RedisEndpoint
	}{
		{"Single", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/2"}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"127.0.0.1:6379"}, DB: 2}},
		{"DefaultPort", map[string]string{"REDIS_URL": "redis://cache.internal"}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"cache.internal:6379"}}},
		{"UpstashOnFly", map[string]string{"REDIS_URL": "redis://default:AbC123@fly-tollgate-redis.upstash.io:6379"}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"fly-tollgate-redis.upstash.io:6379"}, Username: "default", Password: "AbC123"}},
		{"TLSWithCA", map[string]string{"REDIS_URL": "rediss://:p%40ss@redis.example.com:6380", "REDIS_TLS_CA_FILE": ca}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"redis.example.com:6380"}, Password: "p@ss", TLS: true}},
		{"PasswordWithSlash", map[string]string{"REDIS_URL": "redis://:a/b?c@h:1/0"}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"h:1"}, Password: "a/b?c"}},
		{"IPv6", map[string]string{"REDIS_URL": "redis://[::1]:6379,[fd00::2]", "REDIS_CLUSTER": "true"}, config.RedisCluster,
			config.RedisEndpoint{Addrs: []string{"[::1]:6379", "[fd00::2]:6379"}}},
		{"Cluster", map[string]string{"REDIS_URL": "rediss://n1:7000,n2:7001,n3:7002", "REDIS_CLUSTER": "true"}, config.RedisCluster,
			config.RedisEndpoint{Addrs: []string{"n1:7000", "n2:7001", "n3:7002"}, TLS: true}},
		{"ClusterOneSeed", map[string]string{"REDIS_URL": "redis://clustercfg.example:6379", "REDIS_CLUSTER": "1"}, config.RedisCluster,
			config.RedisEndpoint{Addrs: []string{"clustercfg.example:6379"}}},
		{"Sentinel", map[string]string{"REDIS_URL": "redis://:masterpw@s1:26379,s2:26379/1", "REDIS_SENTINEL_MASTER": "mymaster",
			"REDIS_SENTINEL_PASSWORD": "sentinelpw"}, config.RedisSentinel,
			config.RedisEndpoint{Addrs: []string{"s1:26379", "s2:26379"}, Password: "masterpw", DB: 1}},
		{"ClusterFalse", map[string]string{"REDIS_URL": "redis://h:6379", "REDIS_CLUSTER": "false"}, config.RedisSingle,
			config.RedisEndpoint{Addrs: []string{"h:6379"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(tt.vars))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.RedisMode() != tt.mode {
				t.Errorf("RedisMode = %s, want %s", c.RedisMode(), tt.mode)
			}
			got, err := config.ParseRedisURL(c.RedisURL)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRedisURL = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// A Redis URL usually holds a password: no problem may echo it.
func TestLoadBadRedisURLHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://u:hunter2@h", "redis://u:hunter2@h:0", "redis://u:hunter2@h/x", "redis://u:hunter2@a,b",
		"redis://u:hunter2@h?x=1", "redis://u:hunter2%zz@h", "redis-cluster://u:hunter2@h"} {
		err := loadErr(map[string]string{"REDIS_URL": u})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Load(REDIS_URL=%s) error = %v, want one without the password", u, err)
		}
	}
}

// writeCA writes a PEM certificate (self-signed, good enough for parsing) and
// returns its path.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadErr(vars map[string]string) error {
	_, err := config.Load(env(vars))
	return err
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
		"REDIS_URL":                "redis://:pw@h:0",
		"REDIS_CLUSTER":            "yes",
		"REDIS_KEY_PREFIX":         "{t}",
		"GATEWAY_REPLICAS":         "none",
	}
	c, err := config.Load(env(vars))
	if !reflect.DeepEqual(c, config.Config{}) {
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
