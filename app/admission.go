package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/limiter"
)

// NewLimiter returns the admission limiter the configuration asks for: the
// shared Redis one when REDIS_URL is set, else the in-process twin, which is
// exact only while a single replica runs. close releases its connections.
//
// A Redis that does not answer at start is logged, not fatal (fail-closed routes
// answer 503 until it does); a Redis whose shape contradicts the configuration
// (a Cluster node without REDIS_CLUSTER, or the reverse) is an error, because
// every admission would fail with MOVED or CLUSTERDOWN.
func NewLimiter(ctx context.Context, cfg config.Config, log *slog.Logger) (lim limiter.Limiter, close func(), err error) {
	lim, _, _, close, err = newLimiter(ctx, cfg, log, nil)
	return lim, close, err
}

// newLimiter is NewLimiter that also returns the Redis client (nil without
// REDIS_URL), which readiness pings, and its up/down state (down already when
// Redis did not answer at start). now replaces the limiter's clock (tests).
func newLimiter(ctx context.Context, cfg config.Config, log *slog.Logger, now func() time.Time) (lim limiter.Limiter, client redis.UniversalClient, state *depState, close func(), err error) {
	if cfg.RedisURL == "" {
		log.Warn("REDIS_URL is not set: rate limits and concurrency caps are kept in this process only. " +
			"That is exact for a single replica; with several replicas each enforces its own copy. Set REDIS_URL before scaling out.")
		return limiter.NewLocal(now), nil, nil, func() {}, nil
	}
	client, err = NewRedisClient(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	checkCtx, cancel := context.WithTimeout(ctx, 2*cfg.RedisTimeout+time.Second)
	defer cancel()
	if err := checkRedis(checkCtx, cfg, client); err != nil {
		if _, ok := errors.AsType[*RedisModeError](err); ok {
			client.Close()
			return nil, nil, nil, nil, err
		}
		state = newRedisState(client, log)
		state.failed(ctx, err)
	}
	// Admissions take at most three quarters of the pool, so that settles (a few
	// workers' pipelines) and readiness always find a connection.
	lim = limiter.NewRedis(client, limiter.RedisOptions{Prefix: cfg.RedisKeyPrefix, Timeout: cfg.RedisTimeout, Wait: cfg.RedisWait,
		MaxCalls: max(1, cfg.RedisPoolSize*3/4), Replicas: cfg.Replicas, Now: now})
	if state == nil {
		state = newRedisState(client, log)
	}
	return lim, client, state, func() { client.Close() }, nil
}

// NewRedisClient builds the go-redis client REDIS_URL and its companions
// describe: a single node, a Cluster (REDIS_CLUSTER) or a Sentinel-managed
// master (REDIS_SENTINEL_MASTER), over TLS for rediss://.
func NewRedisClient(cfg config.Config) (redis.UniversalClient, error) {
	opts, err := redisOptions(cfg)
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(opts), nil
}

func redisOptions(cfg config.Config) (*redis.UniversalOptions, error) {
	e, err := config.ParseRedisURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("app: REDIS_URL %w", err)
	}
	opts := &redis.UniversalOptions{
		Addrs:            e.Addrs,
		Username:         e.Username,
		Password:         e.Password,
		DB:               e.DB,
		IsClusterMode:    cfg.RedisMode() == config.RedisCluster,
		MasterName:       cfg.RedisSentinelMaster,
		SentinelPassword: cfg.RedisSentinelPassword,
		// A call may wait up to REDIS_WAIT for a pooled connection (a burst queues
		// there), and once sent Redis must answer within REDIS_TIMEOUT: the socket
		// deadlines come from these, not from the call's context, whose deadline
		// also covers the wait. A write blocks only once Redis stops reading, which
		// the read deadline notices first; a write deadline as short would instead
		// trip on this replica's own goroutine running late in a burst (seen: one
		// "write: i/o timeout" in 20,000 requests released at once on 2 cores).
		PoolSize:     cfg.RedisPoolSize,
		PoolTimeout:  max(cfg.RedisWait, time.Millisecond),
		ReadTimeout:  cfg.RedisTimeout,
		WriteTimeout: max(cfg.RedisTimeout, time.Second),
		DialTimeout:  max(cfg.RedisTimeout, time.Second),
		// Never resend a command: go-redis retries a call whose connection broke
		// after it was written, and Redis may already have run it. An ADMIT run
		// twice takes two rate tokens and two holds for one request. The limiter
		// retries only what Redis provably did not run (see limiter.Redis).
		MaxRetries:   -1,
		MaxRedirects: -1,
		// An ADMIT and its reply are well under 4 KiB, and longer ones (a sweep's,
		// a rebuild's) stream through the buffer. go-redis's defaults (32 KiB each
		// way, 128 KiB for a pipeline's reads) are 64 KiB or more per pooled
		// connection, and a burst opens the whole pool.
		ReadBufferSize:          8 << 10,
		WriteBufferSize:         8 << 10,
		PipelineReadBufferSize:  8 << 10,
		PipelineWriteBufferSize: 8 << 10,
	}
	if e.TLS {
		// ServerName stays empty: each connection verifies the host it dials,
		// which differs per node in a Cluster or behind Sentinel.
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.RedisTLSCAFile != "" {
			if opts.TLSConfig.RootCAs, err = config.LoadCAFile(cfg.RedisTLSCAFile); err != nil {
				return nil, fmt.Errorf("app: REDIS_TLS_CA_FILE: %w", err)
			}
		}
	}
	return opts, nil
}

// RedisModeError says the Redis server is shaped unlike the configuration says.
type RedisModeError struct{ msg string }

func (e *RedisModeError) Error() string { return e.msg }

// CheckRedis connects once with the configuration's client and reports whether
// Redis answers and is shaped as configured; for `serve --check-config --connect`.
func CheckRedis(ctx context.Context, cfg config.Config) error {
	client, err := NewRedisClient(cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	return checkRedis(ctx, cfg, client)
}

// checkRedis pings Redis and compares its cluster_enabled (INFO cluster) with
// REDIS_CLUSTER.
func checkRedis(ctx context.Context, cfg config.Config, client redis.UniversalClient) error {
	mode := cfg.RedisMode()
	if mode == config.RedisCluster {
		// A ClusterClient cannot even ping a node that is no Cluster member, so
		// ask the first seed directly.
		if err := checkSeedIsCluster(ctx, cfg); err != nil {
			return err
		}
	}
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("app: Redis (REDIS_URL): %w", err)
	}
	if mode != config.RedisSingle {
		return nil
	}
	info, err := client.Info(ctx, "cluster").Result()
	if err == nil && strings.Contains(info, "cluster_enabled:1") {
		return &RedisModeError{"REDIS_URL points at a Redis Cluster node (cluster_enabled:1) but REDIS_CLUSTER is not true: " +
			"set REDIS_CLUSTER=true, or every admission of a team whose slot lives on another node fails with MOVED"}
	}
	// A managed Redis that refuses INFO is taken at its word: not a Cluster.
	return nil
}

func checkSeedIsCluster(ctx context.Context, cfg config.Config) error {
	opts, err := redisOptions(cfg)
	if err != nil {
		return err
	}
	client := redis.NewClient(opts.Simple()) // the first seed only
	defer client.Close()
	info, err := client.Info(ctx, "cluster").Result()
	if err == nil && strings.Contains(info, "cluster_enabled:0") {
		return &RedisModeError{"REDIS_CLUSTER is true but REDIS_URL points at a Redis server that is not a Cluster node (cluster_enabled:0): " +
			"unset REDIS_CLUSTER, or point REDIS_URL at the Cluster's nodes"}
	}
	return nil
}
