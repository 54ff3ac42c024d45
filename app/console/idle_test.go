package console_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/live"
	"github.com/tollgate/tollgate/limiter/redistest"
)

// commandCounter counts the commands a Redis client sends, pipelined or not.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestDashboardRedisCommandsDoNotGrowWithPages: with no traffic, the Redis
// commands a replica sends for its open dashboards, counted per push of one of
// them, are the same with 10 pages of the team open as with 1 (one shared read
// per push), and a handful: the hour's older minutes are not read again.
func TestDashboardRedisCommandsDoNotGrowWithPages(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	rdb := redistest.Client(t)
	var cmds commandCounter
	rdb.AddHook(&cmds)
	// The streams push every 100 ms (withLive); a read serves them for 90.
	reader := live.New(rdb, live.Options{Prefix: prefix, Reuse: 90 * time.Millisecond})
	e := newEnv(t, withLive(reader))
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")
	gateway := live.New(redistest.Client(t), live.Options{Prefix: prefix})
	call(gateway, o.TeamID, ada.ID, 200, 1234) // a figure in the hour, then quiet
	if err := gateway.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	const pushes = 20
	perPush := func(pages int) float64 {
		streams := make([]*stream, pages)
		for i := range streams {
			streams[i] = owner.openStream("/console/dashboard/live")
			if _, err := streams[i].next(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				go io.Copy(io.Discard, streams[i].r) // read as a browser does
			}
		}
		defer func() {
			for _, s := range streams {
				s.close()
			}
		}()
		if _, err := streams[0].next(5 * time.Second); err != nil { // every page's first read behind
			t.Fatal(err)
		}
		before := cmds.n.Load()
		for range pushes {
			if _, err := streams[0].next(5 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		return float64(cmds.n.Load()-before) / pushes
	}
	one, ten := perPush(1), perPush(10)
	t.Logf("Redis commands per push: %.1f with 1 page open, %.1f with 10", one, ten)
	// A read is 4 commands when idle; a page's push may now and then fall
	// just outside the previous read's Reuse, hence the slack of one read.
	if ten > 2*one+4 || one > 8 {
		t.Errorf("Redis commands per push: %.1f with 1 page open, %.1f with 10; want the same handful", one, ten)
	}
}
