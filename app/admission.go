package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/limiter"
)

// NewLimiter returns the admission limiter the configuration asks for: the
// shared Redis one when REDIS_URL is set, else the in-process twin, which is
// exact only while a single replica runs. close releases its connections.
func NewLimiter(ctx context.Context, cfg config.Config, log *slog.Logger) (lim limiter.Limiter, close func(), err error) {
	if cfg.RedisURL == "" {
		log.Warn("REDIS_URL is not set: rate limits and concurrency caps are kept in this process only. " +
			"That is exact for a single replica; with several replicas each enforces its own copy. Set REDIS_URL before scaling out.")
		return limiter.NewLocal(nil), func() {}, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("app: REDIS_URL: %w", err)
	}
	// Without this, go-redis ignores context deadlines on the socket and a slow
	// Redis would hold requests past REDIS_TIMEOUT.
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	pingCtx, cancel := context.WithTimeout(ctx, 2*cfg.RedisTimeout+time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		log.Error("Redis is not reachable at start; fail-closed routes answer 503 until it is", "err", err)
	}
	lim = limiter.NewRedis(client, limiter.RedisOptions{Prefix: cfg.RedisKeyPrefix, Timeout: cfg.RedisTimeout, Replicas: cfg.Replicas})
	return lim, func() { client.Close() }, nil
}
