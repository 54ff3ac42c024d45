// Package config reads and validates the gateway's environment once at start.
// The Config is passed down; nothing reads the environment later except the
// proxy's provider credentials, which are looked up by name per route.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// Config is every setting of a gateway process.
type Config struct {
	// DatabaseURL is the Postgres connection string. DATABASE_URL, default
	// postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable.
	DatabaseURL string
	// ListenAddr is the public listener. LISTEN_ADDR, default :$PORT when PORT is
	// set (Fly, Render, Cloud Run), else 127.0.0.1:8080.
	ListenAddr string
	// PublicURL is how callers reach the gateway, used in printed instructions,
	// links and the console's cookie choice. PUBLIC_URL, default
	// https://$FLY_APP_NAME.fly.dev on Fly, else http://<ListenAddr>.
	PublicURL string
	// ConfigPollInterval is the backstop reload of the config snapshot when a
	// change notification is missed. CONFIG_POLL_INTERVAL, default 30s.
	ConfigPollInterval time.Duration
	// KeyRotationGrace is how long a rotated key keeps working. KEY_ROTATION_GRACE, default 24h.
	KeyRotationGrace time.Duration
	// The bounds below are 0 when switched off (the variable set to 0).

	// MaxRequestBodyBytes bounds a request body on the wire. MAX_REQUEST_BODY_BYTES, default 8388608.
	MaxRequestBodyBytes int64
	// MaxInflatedBodyBytes bounds a compressed request body once inflated to
	// estimate its cost (413 past it). MAX_INFLATED_BODY_BYTES, default 33554432.
	MaxInflatedBodyBytes int64
	// ReadHeaderTimeout bounds the arrival of a request's headers, so slow-header
	// (slowloris) clients are cut. READ_HEADER_TIMEOUT, default 10s.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading one request body (408 past it), so a
	// client dribbling its body cannot hold a slot. BODY_READ_TIMEOUT, default
	// 60s: 8 MiB at about 1 Mbit/s.
	BodyReadTimeout time.Duration
	// MaxResponseBytes bounds a non-streamed upstream response. MAX_RESPONSE_BYTES,
	// default 134217728: the largest legitimate answer, 2,048 embeddings of 3,072
	// floats as JSON, is about 90 MB.
	MaxResponseBytes int64
	// MaxStreamBytes bounds one streamed response. MAX_STREAM_BYTES, default
	// 134217728: 128k output tokens at about 350 bytes per event is about 45 MB.
	MaxStreamBytes int64
	// RequestTimeout is the ceiling on one request from admission to its last
	// byte. REQUEST_TIMEOUT, default 60m: 128k output tokens at 40 tokens/s is 53m.
	RequestTimeout time.Duration
	// MaxInFlight sheds requests past this many in flight on a replica with 503.
	// MAX_IN_FLIGHT, default 4096: at the measured 72-75 KiB of heap and stacks
	// per open stream, about 300 MiB, which a 1 GB machine holds.
	MaxInFlight int
	// MemberMaxInFlight bounds one member's requests in flight on a replica;
	// MemberQueueDepth more wait up to MemberQueueWait for a slot, then get 429.
	// MEMBER_MAX_IN_FLIGHT default 256, MEMBER_QUEUE_DEPTH default 64,
	// MEMBER_QUEUE_WAIT default 2s.
	MemberMaxInFlight int
	MemberQueueDepth  int
	MemberQueueWait   time.Duration
	// FairQueueWait is how long a request refused only by its team's rate, TPM
	// or concurrency limit waits for a weighted fair turn among the team's
	// members before it gets 429; 0 turns the waiting room off. Far below the
	// SDKs' own timeouts (10 minutes for Anthropic's and OpenAI's), so a waiting
	// paid request never outlives what its caller waits for. FAIR_QUEUE_WAIT,
	// default 3s, at most 1m.
	FairQueueWait time.Duration
	// MaxRequestHeaderBytes bounds a request's headers. MAX_REQUEST_HEADER_BYTES, default 65536.
	MaxRequestHeaderBytes int
	// MaxResponseHeaderBytes bounds an upstream's response headers; past it the
	// caller gets 502. MAX_RESPONSE_HEADER_BYTES, default 65536.
	MaxResponseHeaderBytes int64
	// UpstreamFirstByteTimeout bounds the wait for an upstream's response headers.
	// UPSTREAM_FIRST_BYTE_TIMEOUT, default 10m.
	UpstreamFirstByteTimeout time.Duration
	// StreamIdleTimeout ends a response when the upstream sends nothing for this
	// long. STREAM_IDLE_TIMEOUT, default 2m.
	StreamIdleTimeout time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests on SIGTERM.
	// SHUTDOWN_TIMEOUT, default 30s.
	ShutdownTimeout time.Duration
	// LedgerSpoolDir keeps the ledger rows Postgres has not taken yet, fsync'd,
	// so a shutdown or crash during an outage loses none; the next start
	// replays them. LEDGER_SPOOL_DIR, default /tmp/tollgate-ledger: it survives
	// a restart of the process, not of a container; mount a volume to keep it.
	LedgerSpoolDir string
	// LedgerSpoolMaxRows is how many unwritten ledger rows a replica keeps
	// before it refuses new paid requests (about 500 bytes each on disk).
	// LEDGER_SPOOL_MAX_ROWS, default 100000.
	LedgerSpoolMaxRows int
	// LogLevel is debug, info, warn or error. LOG_LEVEL, default info.
	LogLevel slog.Level
	// RedisURL is the shared admission store: redis://[user:password@]host:port[/db],
	// rediss:// for TLS; several comma-separated host:port for Cluster seeds or
	// Sentinels. REDIS_URL, default none: limits are then kept per process, correct
	// only for one replica.
	RedisURL string
	// RedisCluster says REDIS_URL's hosts are Redis Cluster nodes. REDIS_CLUSTER,
	// default false.
	RedisCluster bool
	// RedisSentinelMaster names the master that REDIS_URL's hosts, Sentinels,
	// watch. REDIS_SENTINEL_MASTER, default none (no Sentinel).
	RedisSentinelMaster string
	// RedisSentinelPassword authenticates to the Sentinels themselves; REDIS_URL's
	// credentials are the master's. REDIS_SENTINEL_PASSWORD, default none.
	RedisSentinelPassword string
	// RedisTLSCAFile is a PEM file of CAs that sign the Redis server certificate,
	// for a rediss:// REDIS_URL on a private CA. REDIS_TLS_CA_FILE, default none:
	// the system roots.
	RedisTLSCAFile string
	// RedisKeyPrefix starts every Redis key, so several gateways (or tests) can
	// share one Redis. REDIS_KEY_PREFIX, default "tg:".
	RedisKeyPrefix string
	// RedisTimeout bounds how long Redis may take to answer a call once it is sent
	// (the socket's read and write deadlines); past it a fail-closed route answers
	// 503. REDIS_TIMEOUT, default 1s: a Redis that answers, however busy, is not
	// down. Under 20,000 requests released at once on a saturated 2-core machine,
	// one call in 60,000 waited past 150ms, and one in 120,000 past 500ms; none
	// past 1s in 180,000.
	RedisTimeout time.Duration
	// RedisWait bounds how long a call waits for a free pooled connection before it
	// is sent: a burst queues here, and a busy Redis that answers is not down.
	// REDIS_WAIT, default 5s.
	RedisWait time.Duration
	// RedisPoolSize is how many connections each replica keeps to Redis at most;
	// admissions use three quarters of them. More is not faster: Redis runs one
	// script at a time, and every call queued inside it waits for the ones ahead,
	// so a burst is better queued in the replica (REDIS_WAIT). REDIS_POOL_SIZE,
	// default 16.
	RedisPoolSize int
	// Replicas is how many gateway replicas share the limits; a route that fails
	// open while Redis is down admits at each limit divided by it. GATEWAY_REPLICAS, default 1.
	Replicas int
	// ConcurrencyLease is how long a request holds its concurrency slot at most; a
	// crashed replica's slots come back after it. CONCURRENCY_LEASE, default 15m.
	ConcurrencyLease time.Duration
	// ProviderRateLimits makes the gateway learn each provider account's own
	// rate limits from the upstream's rate-limit headers and 429s, shared
	// across replicas through Redis, and hold or refuse requests instead of
	// sending them into a known 429. PROVIDER_RATE_LIMITS, default true.
	ProviderRateLimits bool
	// ProviderLimitWait is how long a request may wait for an exhausted
	// account's capacity before the gateway answers 429 itself; 0 never waits.
	// PROVIDER_LIMIT_WAIT, default 2s.
	ProviderLimitWait time.Duration

	// AdminAddr is the operator's listener (/healthz, /readyz, /metrics,
	// /debug/pprof), apart from tenant traffic; "" when switched off. ADMIN_ADDR,
	// default 127.0.0.1:9090; "off" disables it; in a container 0.0.0.0:9090.
	AdminAddr string
	// AdminHosts are the host names, comma-separated and in lower case, the
	// admin listener answers under besides IP literals and localhost, so a
	// DNS-rebinding page (a name of the attacker's that resolves to the
	// listener) cannot read it. A string, not a slice, keeps Config comparable.
	// ADMIN_HOSTS, default none.
	AdminHosts string
	// ClientIPHeader names the header a trusted proxy in front of every
	// replica sets to the caller's address (Fly-Client-IP on Fly, or
	// X-Forwarded-For, of which the last entry, the one the proxy appended, is
	// taken); sign-ins are throttled per that address. CLIENT_IP_HEADER,
	// default none: the connection's peer, since without such a proxy any
	// caller could send the header and pick a fresh address per attempt.
	ClientIPHeader string
	// DrainDelay is how long /readyz answers "draining" on SIGTERM before the
	// public listener stops taking requests, so load balancers stop sending them
	// first. DRAIN_DELAY, default 5s.
	DrainDelay time.Duration
	// OutboundAllow lists the loopback and private addresses (CIDR prefixes)
	// that owner-supplied endpoints may reach: route upstreams, health probes,
	// sign-in providers. Link-local, metadata and the gateway's own listeners
	// stay refused whatever it says. OUTBOUND_ALLOW, default none.
	OutboundAllow []netip.Prefix
	// LogSampleEvery logs one request line in N; refusals and errors are always
	// logged. LOG_SAMPLE_EVERY, default 1 (every request).
	LogSampleEvery int
	// Tracing is where spans go, from the standard OTEL_* variables; zero when
	// tracing is off (see observability.go).
	Tracing Tracing
	// CredentialGrants says which credential variable each team may use and
	// the hosts it may be sent to (grammar in package grant). ANTHROPIC_API_KEY
	// and OPENAI_API_KEY go to their providers' hosts for every team unless
	// granted otherwise; a TOLLGATE_CREDENTIAL_<NAME> is usable only once
	// granted. CREDENTIAL_GRANTS, default none beyond those two.
	CredentialGrants grant.Table
}

// Load reads the environment through getenv and validates it, reporting every
// problem at once, each naming its variable and what would be valid.
func Load(getenv func(string) string) (Config, error) {
	p := parser{getenv: getenv}
	c := Config{
		DatabaseURL:              p.str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable"),
		ListenAddr:               p.str("LISTEN_ADDR", defaultListenAddr(getenv)),
		ConfigPollInterval:       p.duration("CONFIG_POLL_INTERVAL", 30*time.Second, time.Second),
		KeyRotationGrace:         p.duration("KEY_ROTATION_GRACE", 24*time.Hour, 0),
		MaxRequestBodyBytes:      p.bound("MAX_REQUEST_BODY_BYTES", 8<<20, 1024),
		MaxInflatedBodyBytes:     p.bound("MAX_INFLATED_BODY_BYTES", 32<<20, 1024),
		ReadHeaderTimeout:        p.duration("READ_HEADER_TIMEOUT", 10*time.Second, 100*time.Millisecond),
		BodyReadTimeout:          p.boundDuration("BODY_READ_TIMEOUT", time.Minute, time.Second),
		MaxResponseBytes:         p.bound("MAX_RESPONSE_BYTES", 128<<20, 1024),
		MaxStreamBytes:           p.bound("MAX_STREAM_BYTES", 128<<20, 1024),
		RequestTimeout:           p.boundDuration("REQUEST_TIMEOUT", time.Hour, time.Second),
		MaxInFlight:              int(p.bound("MAX_IN_FLIGHT", 4096, 1)),
		MemberMaxInFlight:        int(p.bound("MEMBER_MAX_IN_FLIGHT", 256, 1)),
		MemberQueueDepth:         int(p.int64("MEMBER_QUEUE_DEPTH", 64, 0)),
		MemberQueueWait:          p.duration("MEMBER_QUEUE_WAIT", 2*time.Second, 0),
		FairQueueWait:            p.duration("FAIR_QUEUE_WAIT", 3*time.Second, 0),
		MaxRequestHeaderBytes:    int(p.int64("MAX_REQUEST_HEADER_BYTES", 64<<10, 4096)),
		MaxResponseHeaderBytes:   p.int64("MAX_RESPONSE_HEADER_BYTES", 64<<10, 4096),
		UpstreamFirstByteTimeout: p.boundDuration("UPSTREAM_FIRST_BYTE_TIMEOUT", 10*time.Minute, time.Second),
		StreamIdleTimeout:        p.boundDuration("STREAM_IDLE_TIMEOUT", 2*time.Minute, time.Second),
		ShutdownTimeout:          p.duration("SHUTDOWN_TIMEOUT", 30*time.Second, 0),
		LedgerSpoolDir:           p.str("LEDGER_SPOOL_DIR", "/tmp/tollgate-ledger"),
		LedgerSpoolMaxRows:       int(p.int64("LEDGER_SPOOL_MAX_ROWS", 100000, 1)),
		RedisKeyPrefix:           p.str("REDIS_KEY_PREFIX", "tg:"),
		RedisTimeout:             p.duration("REDIS_TIMEOUT", time.Second, time.Millisecond),
		RedisWait:                p.duration("REDIS_WAIT", 5*time.Second, 0),
		RedisPoolSize:            int(p.int64("REDIS_POOL_SIZE", 16, 1)),
		Replicas:                 int(p.int64("GATEWAY_REPLICAS", 1, 1)),
		ConcurrencyLease:         p.duration("CONCURRENCY_LEASE", 15*time.Minute, time.Second),
		ProviderRateLimits:       p.bool("PROVIDER_RATE_LIMITS", true),
		ProviderLimitWait:        p.duration("PROVIDER_LIMIT_WAIT", 2*time.Second, 0),
	}
	c.PublicURL = p.str("PUBLIC_URL", defaultPublicURL(getenv, c.ListenAddr))
	p.checkDatabaseURL(c.DatabaseURL)
	_, port, err := net.SplitHostPort(c.ListenAddr)
	listenOK := err == nil && validPort(port)
	switch {
	case listenOK:
	case getenv("LISTEN_ADDR") == "" && getenv("PORT") != "":
		p.fail("PORT", "must be a port from 1 to 65535, not %q", getenv("PORT"))
	default:
		p.fail("LISTEN_ADDR", "must be host:port or :port with a port from 1 to 65535, not %q", c.ListenAddr)
	}
	// A PUBLIC_URL derived from a bad listen address is already reported above.
	if u, err := url.Parse(c.PublicURL); (listenOK || getenv("PUBLIC_URL") != "") &&
		(err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		p.fail("PUBLIC_URL", "must be an http:// or https:// URL, not %q", c.PublicURL)
	}
	p.loadRedis(&c)
	p.loadObservability(&c)
	if v := p.str("OUTBOUND_ALLOW", ""); v != "" {
		allow, err := netguard.ParseAllow(v)
		if err != nil {
			p.fail("OUTBOUND_ALLOW", "must be comma-separated IP addresses or CIDR prefixes such as 127.0.0.1/32,10.0.0.0/8: %v", err)
		}
		c.OutboundAllow = allow
	}
	if c.FairQueueWait > time.Minute {
		p.fail("FAIR_QUEUE_WAIT", "must be at most 1m (0 turns the waiting room off), not %s", c.FairQueueWait)
	}
	if strings.ContainsAny(c.RedisKeyPrefix, "{}") {
		p.fail("REDIS_KEY_PREFIX", "must not contain { or }, which would replace the team's Redis Cluster hash tag")
	}
	if level := p.str("LOG_LEVEL", "info"); c.LogLevel.UnmarshalText([]byte(level)) != nil {
		p.fail("LOG_LEVEL", "must be debug, info, warn or error, not %q", level)
	}
	grants, err := grant.Parse(getenv("CREDENTIAL_GRANTS"))
	if err != nil {
		p.fail("CREDENTIAL_GRANTS", "%v", err)
	}
	c.CredentialGrants = grants
	if len(p.errs) > 0 {
		return Config{}, errors.Join(p.errs...)
	}
	return c, nil
}

// sslModes are the sslmode values Postgres clients (and pgx) accept.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// checkDatabaseURL checks the parts of DATABASE_URL a typo breaks. Its messages
// never repeat the URL, which usually holds a password.
func (p *parser) checkDatabaseURL(raw string) {
	const form = "postgres://user:password@host:5432/dbname?sslmode=require"
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		p.fail("DATABASE_URL", "must be a postgres:// URL such as %s", form)
		return
	}
	if port := u.Port(); port != "" && !validPort(port) {
		p.fail("DATABASE_URL", "must have a port from 1 to 65535 after the host, as in %s", form)
	}
	if mode := u.Query().Get("sslmode"); mode != "" && !slices.Contains(sslModes, mode) {
		p.fail("DATABASE_URL", "sslmode must be one of %s, not %q", strings.Join(sslModes, ", "), mode)
	}
}

// defaultPublicURL is the app's fly.dev address on Fly, which sets
// FLY_APP_NAME on every machine, else the listen address over http.
func defaultPublicURL(getenv func(string) string, listen string) string {
	if app := getenv("FLY_APP_NAME"); app != "" {
		return "https://" + app + ".fly.dev"
	}
	return "http://" + hostForURL(listen)
}

func defaultListenAddr(getenv func(string) string) string {
	if port := getenv("PORT"); port != "" {
		return ":" + port
	}
	return "127.0.0.1:8080"
}

func hostForURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

type parser struct {
	getenv func(string) string
	errs   []error
}

func (p *parser) fail(name, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s %s", name, fmt.Sprintf(format, args...)))
}

func (p *parser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *parser) bool(name string, def bool) bool {
	v := strings.TrimSpace(p.getenv(name))
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, "must be true or false, not %q", v)
		return def
	}
	return b
}

func (p *parser) duration(name string, def, min time.Duration) time.Duration {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		p.fail(name, "must be a duration such as 30s or 5m, at least %s, not %q", min, v)
		return def
	}
	return d
}

// bound reads a limit that 0 switches off; otherwise it must be at least min.
func (p *parser) bound(name string, def, min int64) int64 {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n != 0 && n < min {
		p.fail(name, "must be 0 (off) or a whole number of at least %d, not %q", min, v)
		return def
	}
	return n
}

// boundDuration reads a time limit that 0 switches off; otherwise it must be
// at least min.
func (p *parser) boundDuration(name string, def, min time.Duration) time.Duration {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d != 0 && d < min {
		p.fail(name, "must be 0 (off) or a duration such as 30s or 5m, at least %s, not %q", min, v)
		return def
	}
	return d
}

func (p *parser) int64(name string, def, min int64) int64 {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min {
		p.fail(name, "must be a whole number of at least %d, not %q", min, v)
		return def
	}
	return n
}
