// Package redisstats reads what a Redis server says it spent on scripts, for the
// load generator and the limiter's benchmarks.
package redisstats

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Scripts is the number of EVAL/EVALSHA calls the server has run and the
// microseconds it spent inside them (INFO commandstats), for every client of
// the server; zeros when it cannot be read.
func Scripts(ctx context.Context, r *redis.Client) (calls, usec int64) {
	info, err := r.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}
