package clustertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters only, every slot assigned.
type Cluster struct {
	// Addrs are the nodes' host:port, in slot order: node i owns the i-th range.
	Addrs []string
}

// slotCount is the number of hash slots of every Redis Cluster.
const slotCount = 16384

// StartCluster starts n redis-server processes with cluster-enabled, splits
// the slots evenly between them, joins them with CLUSTER MEET and waits until
// every node reports cluster_state:ok and knows every slot.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	RequireRedisServer(t)
	ports := freePorts(t, 2*n) // a data port and a cluster bus port per node
	c := &Cluster{}
	for i := range n {
		port, bus := ports[2*i], ports[2*i+1]
		dir := t.TempDir()
		args := append(commonArgs(port), "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--dir", dir)
		a := addr(port)
		_, err := startProcess(t, dir, args, func(ctx context.Context) error { return ping(ctx, a) })
		if err != nil {
			t.Fatalf("clustertest: node %d: %v", i, err)
		}
		c.Addrs = append(c.Addrs, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx, ports); err != nil {
		t.Fatalf("clustertest: forming the cluster: %v", err)
	}
	return c
}

// form assigns the slot ranges, introduces every node to the first and waits
// for the cluster to agree.
func (c *Cluster) form(ctx context.Context, ports []int) error {
	n := len(c.Addrs)
	for i, a := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: a})
		lo, hi := i*slotCount/n, (i+1)*slotCount/n-1
		err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		if err == nil && i > 0 {
			err = node.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", ports[0], ports[1]).Err()
		}
		node.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	var last error
	for {
		if last = c.agreed(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %v", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreed is nil once every node sees the cluster as ok, with all nodes and all
// slots.
func (c *Cluster) agreed(ctx context.Context) error {
	for _, a := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: a})
		info, err := node.ClusterInfo(ctx).Result()
		node.Close()
		if err != nil {
			return err
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384",
			"cluster_known_nodes:" + strconv.Itoa(len(c.Addrs))} {
			if !strings.Contains(info, want) {
				return fmt.Errorf("%s: no %s yet", a, want)
			}
		}
	}
	return nil
}

// URL is a REDIS_URL listing every node, for REDIS_CLUSTER=true.
func (c *Cluster) URL() string { return "redis://" + strings.Join(c.Addrs, ",") }

// Client returns a ClusterClient on the nodes, closed at cleanup. Context
// deadlines bind on the socket, as the limiter requires.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// NodeOf returns the index of the node that owns key's slot.
func (c *Cluster) NodeOf(ctx context.Context, key string) (int, error) {
	node := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer node.Close()
	slot, err := node.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	n := int64(len(c.Addrs))
	for i := range n {
		if lo, hi := i*slotCount/n, (i+1)*slotCount/n-1; slot >= lo && slot <= hi {
			return int(i), nil
		}
	}
	return 0, errors.New("slot out of range")
}

func ping(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err()
}
