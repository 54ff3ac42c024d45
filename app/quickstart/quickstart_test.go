package quickstart_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/limiter/redistest"
)

var (
	printedKey = regexp.MustCompile(`export TOLLGATE_KEY=(tg_\S+)`)
	printedURL = regexp.MustCompile(`tollgate is running at (http://\S+) `)
)

// TestQuickStartOnCleanClone does what the README's quick start tells a
// newcomer: clone, `make run`, copy the printed key, call through an SDK. The
// clone is of the committed HEAD (QUICKSTART_REPO names another repository),
// so an uncommitted README or Makefile change is not what it tests.
//
// It is quick: the clone always lands in the same directory (one per source
// repository, locked while in use, removed after), and Go's build cache keys
// a package by its directory, so every package and the `go run` binary that
// did not change since the last run come from the cache; on a fresh CI
// machine the dependencies come from `make test`'s go vet and only this
// module's packages compile.
func TestQuickStartOnCleanClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and runs make run")
	}
	t.Parallel()
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed, and CI is set", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	src := os.Getenv("QUICKSTART_REPO")
	if src == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			t.Skipf("not in a git checkout: %v", err)
		}
		src = strings.TrimSpace(string(out))
	}
	clone := stableCloneDir(t, src)
	if out, err := exec.Command("git", "clone", "--quiet", src, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone %s: %v\n%s", src, err, out)
	}

	dbURL, dropDB := freshDatabase(t)
	defer dropDB()
	listen, mock := freeAddr(t), freeAddr(t)
	env := newcomerEnv(map[string]string{
		"DATABASE_URL":     dbURL,
		"REDIS_KEY_PREFIX": redistest.Prefix(t), // make run uses the local Redis when one answers
		"LISTEN_ADDR":      listen,
	})

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.Command("make", "run", "RUN_ARGS=--mock-addr "+mock)
	cmd.Dir, cmd.Env = clone, env
	// Its own process group: make, go run and tollgate stop together, as with Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := sync.OnceFunc(func() { stopGroup(t, cmd, exited) })
	defer stop()

	var out syncBuffer
	found := make(chan [2]string, 1)
	go func() {
		var key, base string
		sc := bufio.NewScanner(io.TeeReader(stdout, &out))
		for sc.Scan() {
			if m := printedURL.FindStringSubmatch(sc.Text()); m != nil {
				base = m[1]
			}
			if m := printedKey.FindStringSubmatch(sc.Text()); m != nil {
				key = m[1]
			}
			if key != "" && base != "" {
				found <- [2]string{base, key}
				base, key = "", ""
			}
		}
	}()
	var base, key string
	select {
	case got := <-found:
		base, key = got[0], got[1]
	case err := <-exited:
		t.Fatalf("make run exited before printing a key: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	case <-ctx.Done():
		t.Fatalf("make run printed no key within %s\nstdout:\n%s\nstderr:\n%s", time.Since(start), out.String(), stderr.String())
	}
	t.Logf("make run printed its key after %s", time.Since(start).Round(time.Millisecond))
	if want := "http://" + listen; base != want {
		t.Errorf("make run says it runs at %s, want %s (LISTEN_ADDR)", base, want)
	}

	// The README's SDK line: only the base URL and the key change.
	client := anthropic.NewClient(option.WithBaseURL(base+"/anthropic"), option.WithAPIKey(key), option.WithMaxRetries(0))
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-sonnet-4-6"),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello from the quick start"))},
	})
	if err != nil {
		t.Fatalf("SDK call through the quick-start gateway: %v\nstderr:\n%s", err, stderr.String())
	}
	if len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.OutputTokens <= 0 {
		t.Errorf("SDK call returned %+v, want text and usage from the mock provider", msg)
	}

	// Ctrl-C: the gateway shuts down gracefully and exits 0, so make reports no error.
	stop()
	if strings.Contains(stderr.String(), "make: ***") {
		t.Errorf("make run after Ctrl-C:\n%s\nwant no make error: tollgate exits 0 after a graceful shutdown", stderr.String())
	}
}

// stableCloneDir returns an empty directory whose path depends only on src,
// held under an exclusive lock until the test ends and removed then.
func stableCloneDir(t *testing.T, src string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(src))
	dir := filepath.Join(os.TempDir(), "tollgate-quickstart-"+hex.EncodeToString(sum[:6]))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cleanup := func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the clone: %v", err)
		}
	}
	cleanup() // a run that was killed leaves its clone behind
	t.Cleanup(func() {
		cleanup()
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	})
	return dir
}

// newcomerEnv is this process's environment as a newcomer's shell would have
// it, minus anything that would point make run away from the local services
// or at a real provider, plus vars.
func newcomerEnv(vars map[string]string) []string {
	drop := []string{"REDIS_URL", "PORT", "PUBLIC_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := vars[name]; set || slices.Contains(drop, name) || strings.HasPrefix(name, "TOLLGATE_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// freshDatabase names a database that does not exist yet (make run creates
// it, as on a newcomer's machine) and returns a func that drops it.
func freshDatabase(t *testing.T) (string, func()) {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		base = dbtest.DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "tollgate_quickstart_" + hex.EncodeToString(b)
	u.Path = "/" + name
	admin := *u
	admin.Path = "/postgres"
	return u.String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			t.Errorf("connect to drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	}
}

// stopGroup sends the process group Ctrl-C's SIGINT, and SIGKILL if it has not
// exited 30s later.
func stopGroup(t *testing.T, cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("make run did not stop within 30s of SIGINT; killing its process group")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// go run's child may outlive make by a moment; nothing of the group may remain.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of make run's group %d still running 10s after it stopped", pgid)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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
