package console

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed throttle.lua
var takeSource string

var takeScript = redis.NewScript(takeSource)

// redisThrottle is the throttle every replica shares: one script checks and
// reserves an attempt under all its keys at once, on Redis's clock.
type redisThrottle struct {
	client redis.UniversalClient
	prefix string
	window time.Duration
}

// newRedisThrottle returns a throttle over window that keeps its counts in
// client under prefix (REDIS_KEY_PREFIX).
func newRedisThrottle(client redis.UniversalClient, prefix string, window time.Duration) *redisThrottle {
	return &redisThrottle{client: client, prefix: prefix, window: window}
}

// key is where key's attempts live. All share the hash tag {signin}, so one
// script may touch an account's and an address's sets on Redis Cluster;
// sign-ins are few enough for one slot. The name is hashed: it bounds the
// key's length, and Redis holds no email addresses.
func (t *redisThrottle) key(key string) string {
	sum := sha256.Sum256([]byte(key))
	return t.prefix + "{signin}:" + hex.EncodeToString(sum[:16])
}

// Take implements throttle.
func (t *redisThrottle) Take(ctx context.Context, id string, buckets ...bucket) (time.Duration, error) {
	return t.run(ctx, "take", id, buckets)
}

// Wait implements throttle.
func (t *redisThrottle) Wait(ctx context.Context, buckets ...bucket) (time.Duration, error) {
	return t.run(ctx, "peek", "", buckets)
}

func (t *redisThrottle) run(ctx context.Context, mode, id string, buckets []bucket) (time.Duration, error) {
	keys := make([]string, len(buckets))
	args := []any{mode, t.window.Microseconds(), id}
	for i, b := range buckets {
		keys[i] = t.key(b.Key)
		args = append(args, strconv.Itoa(b.Limit))
	}
	us, err := takeScript.Run(ctx, t.client, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("console: sign-in throttle: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Release implements throttle.
func (t *redisThrottle) Release(ctx context.Context, id string, keys ...string) error {
	_, err := t.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range keys {
			p.ZRem(ctx, t.key(key), id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("console: sign-in throttle: release: %w", err)
	}
	return nil
}

// Reset implements throttle.
func (t *redisThrottle) Reset(ctx context.Context, key string) error {
	if err := t.client.Del(ctx, t.key(key)).Err(); err != nil {
		return fmt.Errorf("console: sign-in throttle: reset: %w", err)
	}
	return nil
}
