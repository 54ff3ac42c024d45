// Package redistest gives tests a Redis client and a key prefix of their own, so that
// tests share one Redis, run in parallel and run twice in a row without FLUSHDB.
// It is for tests only; no other code imports it.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client returns a client for REDIS_URL, or 127.0.0.1:6379 when unset, closed at
// cleanup. It fails the test when Redis does not answer.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: "127.0.0.1:6379"}
	if url := os.Getenv("REDIS_URL"); url != "" {
		var err error
		if opt, err = redis.ParseURL(url); err != nil {
			t.Fatalf("redistest: REDIS_URL: %v", err)
		}
	}
	// The limiter's timeouts are context deadlines; go-redis ignores them otherwise.
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: ping %s: %v", opt.Addr, err)
	}
	return c
}

// Prefix returns a random key prefix, "test:<hex>:"; at cleanup every key under it is
// deleted (SCAN and UNLINK).
func Prefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	prefix := "test:" + hex.EncodeToString(b) + ":"
	c := Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("redistest: scan %s*: %v", prefix, err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
				t.Errorf("redistest: unlink %s*: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}
