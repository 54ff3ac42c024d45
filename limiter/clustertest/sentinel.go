package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a master watched by one Sentinel. Both require a password, the
// master's and the Sentinel's own, as a hardened deployment would.
type Sentinel struct {
	MasterAddr, SentinelAddr   string
	MasterName                 string
	MasterPassword, SentinelPW string
}

// StartSentinel starts a master and a Sentinel that monitors it as "mymaster".
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	RequireRedisServer(t)
	ports := freePorts(t, 2)
	s := &Sentinel{MasterAddr: addr(ports[0]), SentinelAddr: addr(ports[1]), MasterName: "mymaster",
		MasterPassword: "master-pw-for-test", SentinelPW: "sentinel-pw-for-test"}

	dir := t.TempDir()
	_, err := startProcess(t, dir, append(commonArgs(ports[0]), "--requirepass", s.MasterPassword, "--dir", dir),
		func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: s.MasterAddr, Password: s.MasterPassword, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		})
	if err != nil {
		t.Fatalf("clustertest: sentinel's master: %v", err)
	}

	// A Sentinel rewrites its config file, so it needs one of its own.
	sdir := t.TempDir()
	conf := filepath.Join(sdir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nrequirepass %s\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\nsentinel auth-pass %s %s\n",
		ports[1], sdir, s.SentinelPW, s.MasterName, ports[0], s.MasterName, s.MasterPassword)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = startProcess(t, sdir, []string{conf, "--sentinel"}, func(ctx context.Context) error {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddr, Password: s.SentinelPW, MaxRetries: -1})
		defer c.Close()
		return c.GetMasterAddrByName(ctx, s.MasterName).Err()
	})
	if err != nil {
		t.Fatalf("clustertest: sentinel: %v", err)
	}
	return s
}

// URL is a REDIS_URL for REDIS_SENTINEL_MASTER=MasterName: the Sentinel's
// address with the master's password.
func (s *Sentinel) URL() string { return "redis://:" + s.MasterPassword + "@" + s.SentinelAddr + "/0" }
