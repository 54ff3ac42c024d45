package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// RedisMode is the shape of the Redis deployment REDIS_URL points at.
type RedisMode string

const (
	// RedisSingle is one Redis server (or a managed endpoint that looks like one).
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster; REDIS_URL lists seed nodes.
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a master found through Sentinels; REDIS_URL lists the Sentinels.
	RedisSentinel RedisMode = "sentinel"
)

// RedisMode returns the deployment shape the configuration asks for.
func (c Config) RedisMode() RedisMode {
	switch {
	case c.RedisCluster:
		return RedisCluster
	case c.RedisSentinelMaster != "":
		return RedisSentinel
	}
	return RedisSingle
}

// RedisEndpoint is REDIS_URL taken apart.
type RedisEndpoint struct {
	Addrs              []string // host:port, at least one
	Username, Password string
	DB                 int
	TLS                bool // rediss://
}

// redisURLForm is what a valid REDIS_URL looks like, for error messages.
const redisURLForm = "redis://[user:password@]host:port[,host:port...][/db] (rediss:// for TLS)"

// ParseRedisURL takes apart a REDIS_URL. Unlike net/url it accepts a
// comma-separated host list (Cluster seeds, Sentinels); its errors never
// repeat the URL, which may hold a password.
func ParseRedisURL(raw string) (RedisEndpoint, error) {
	var e RedisEndpoint
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok:
		return e, fmt.Errorf("must be a URL of the form %s", redisURLForm)
	case scheme == "redis":
	case scheme == "rediss":
		e.TLS = true
	case scheme == "redis-sentinel" || scheme == "redis-cluster" || scheme == "rediss-cluster":
		return e, fmt.Errorf("must use the redis:// or rediss:// scheme, not %s://; say REDIS_CLUSTER=true or REDIS_SENTINEL_MASTER=<name> instead", scheme)
	default:
		return e, fmt.Errorf("must use the redis:// or rediss:// scheme, not %q, as in %s", scheme+"://", redisURLForm)
	}
	// Hosts and paths never hold '@', so the last one ends the userinfo even when
	// a password holds an unescaped '/', '?' or '#'.
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		userinfo := rest[:i]
		rest = rest[i+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err1, err2 error
		e.Username, err1 = url.PathUnescape(user)
		if hasPass {
			e.Password, err2 = url.PathUnescape(pass)
		}
		if err1 != nil || err2 != nil {
			return e, errors.New("has a badly percent-encoded user or password; encode special characters as %XX")
		}
	}
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	if authority == "" {
		return e, fmt.Errorf("has no host; want %s", redisURLForm)
	}
	for _, hp := range strings.Split(authority, ",") {
		addr, err := redisAddr(hp)
		if err != nil {
			return e, err
		}
		e.Addrs = append(e.Addrs, addr)
	}
	path, query, _ := strings.Cut(pathQuery, "?")
	if strings.Contains(path, "#") || strings.Contains(query, "#") {
		return e, errors.New("must not have a #fragment")
	}
	if query != "" {
		return e, errors.New("must not have ?query parameters; timeouts come from REDIS_TIMEOUT, TLS from the rediss:// scheme and REDIS_TLS_CA_FILE")
	}
	if db := strings.Trim(path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || strings.Contains(db, "/") {
			return e, fmt.Errorf("path must be a database number such as /0, not %q", path)
		}
		e.DB = n
	}
	return e, nil
}

// redisAddr checks one host[:port] of REDIS_URL and adds the default port.
func redisAddr(hp string) (string, error) {
	if hp == "" {
		return "", errors.New("has an empty host in its host list")
	}
	host, port := hp, "6379"
	if h, p, err := net.SplitHostPort(hp); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(hp, "[") && strings.HasSuffix(hp, "]") {
		host = hp[1 : len(hp)-1] // a bracketed IPv6 address without a port
	} else if strings.Contains(hp, ":") {
		return "", fmt.Errorf("host %q must be host:port with a port from 1 to 65535 (IPv6 in brackets)", hp)
	}
	if host == "" || strings.ContainsAny(host, "[]/ ") {
		return "", fmt.Errorf("host %q is not a host name or IP address", hp)
	}
	if !validPort(port) {
		return "", fmt.Errorf("host %q must have a port from 1 to 65535", hp)
	}
	return net.JoinHostPort(host, port), nil
}

// loadRedis reads the REDIS_* variables that shape the connection and checks
// that they fit together.
func (p *parser) loadRedis(c *Config) {
	c.RedisURL = p.str("REDIS_URL", "")
	c.RedisCluster = p.bool("REDIS_CLUSTER", false)
	c.RedisSentinelMaster = p.str("REDIS_SENTINEL_MASTER", "")
	c.RedisSentinelPassword = p.getenv("REDIS_SENTINEL_PASSWORD")
	c.RedisTLSCAFile = p.str("REDIS_TLS_CA_FILE", "")

	if c.RedisURL == "" {
		for _, name := range []string{"REDIS_CLUSTER", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_PASSWORD", "REDIS_TLS_CA_FILE"} {
			if p.getenv(name) != "" && !(name == "REDIS_CLUSTER" && !c.RedisCluster) {
				p.fail(name, "needs REDIS_URL, which is empty; set REDIS_URL to %s or unset %s", redisURLForm, name)
			}
		}
		return
	}
	e, err := ParseRedisURL(c.RedisURL)
	if err != nil {
		p.fail("REDIS_URL", "%v", err)
		return
	}
	if c.RedisCluster && c.RedisSentinelMaster != "" {
		p.fail("REDIS_SENTINEL_MASTER", "must be empty when REDIS_CLUSTER is true: a deployment is either a Cluster or Sentinel-managed, not both")
	}
	switch c.RedisMode() {
	case RedisSingle:
		if len(e.Addrs) > 1 {
			p.fail("REDIS_URL", "lists %d hosts; several hosts are Cluster seeds (set REDIS_CLUSTER=true) or Sentinels (set REDIS_SENTINEL_MASTER), a single server takes one host", len(e.Addrs))
		}
	case RedisCluster:
		if e.DB != 0 {
			p.fail("REDIS_URL", "must select database 0 (or none) when REDIS_CLUSTER is true: a Redis Cluster has only database 0, not /%d", e.DB)
		}
	}
	if c.RedisSentinelPassword != "" && c.RedisMode() != RedisSentinel {
		p.fail("REDIS_SENTINEL_PASSWORD", "applies only with REDIS_SENTINEL_MASTER; unset it or name the master")
	}
	if c.RedisTLSCAFile != "" {
		if !e.TLS {
			p.fail("REDIS_TLS_CA_FILE", "needs a rediss:// REDIS_URL; redis:// does not use TLS")
		} else if _, err := LoadCAFile(c.RedisTLSCAFile); err != nil {
			p.fail("REDIS_TLS_CA_FILE", "must be a readable PEM file of CA certificates: %v", err)
		}
	}
}

// LoadCAFile reads a PEM bundle of CA certificates into a pool.
func LoadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
