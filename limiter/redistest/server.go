package redistest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server of the test's own, on a free loopback port, so the test
// can kill, restart and pause it without touching the shared Redis.
type Server struct {
	t    testing.TB
	port string
	dir  string // where Save writes its snapshot and Start reads it
	cmd  *exec.Cmd
}

// StartServer starts a redis-server that is killed when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	s := &Server{t: t, port: port, dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + s.port }

// URL is the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Start (re)starts the server, empty or with what the last Save wrote, and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", s.port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer", s.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Save writes a snapshot of everything in the server, which the next Start loads:
// restarting from it is restoring an older backup.
func (s *Server) Save() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		s.t.Fatalf("redis-server on %s: SAVE: %v", s.Addr(), err)
	}
}

// Kill stops the server at once, losing everything in it since the last Save.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies only once resumed
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause freezes the server: it accepts connections and never answers (a slow Redis).
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}
