// Package clustertest starts throwaway Redis deployments shaped like production
// ones on loopback: a 3-node Redis Cluster, a TLS-only server with a CA made
// by the test, and a Sentinel-managed master. Each process gets free ports and a
// temporary directory of its own and is killed when the test ends. Test-only:
// never imported by non-test code.
package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RequireRedisServer skips the test when redis-server is not installed, except
// under CI (CI=true), where a missing server is a broken machine and fails.
func RequireRedisServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not installed, and CI is set: install redis-server (Debian: apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed")
	}
}

// process is one redis-server (or Sentinel) of the test's.
type process struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// startProcess runs redis-server with args in dir and kills it at cleanup.
// ready is polled until it returns nil; the process's output is reported if it
// never does.
func startProcess(t testing.TB, dir string, args []string, ready func(context.Context) error) (*process, error) {
	t.Helper()
	p := &process{out: &syncBuffer{}}
	p.cmd = exec.Command("redis-server", args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-exited:
			return nil, &exitError{output: p.out.String()}
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("redis-server %v not ready within 15s: %v\n%s", args, err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitError is a redis-server that exited before it was ready.
type exitError struct{ output string }

func (e *exitError) Error() string { return "redis-server exited at start:\n" + e.output }

// freePorts returns n distinct loopback ports nothing listens on right now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// commonArgs keep a test server off disk and on loopback.
func commonArgs(port int) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no"}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
