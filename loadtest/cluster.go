package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/grant"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/migrations"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// cluster is what a scenario runs against, all on loopback: its own database,
// its own Redis key prefix, a mock provider and gateway replicas, each a real
// process started from freshly built binaries and stopped by PID at the end.
type cluster struct {
	bin        string // folder holding tollgate and mockprovider
	dbName     string
	dbURL      string
	adminURL   string
	redisURL   string
	prefix     string
	mockURL    string
	procs      []*exec.Cmd
	Store      *store.Store
	pool       *pgxpool.Pool
	TeamID     int64
	Replicas   []string // base URLs
	credential string
}

// buildBinaries compiles the gateway and the mock provider once per run.
func buildBinaries(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "tollgate-loadtest-")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/tollgate", "./cmd/mockprovider")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	return dir, nil
}

func newCluster(ctx context.Context, bin, baseDB, redisURL string) (*cluster, error) {
	suffix := randomHex(6)
	c := &cluster{bin: bin, dbName: "tollgate_loadtest_" + suffix, redisURL: redisURL, prefix: "loadtest:" + suffix + ":",
		credential: "sk-loadtest-" + suffix}
	u, err := url.Parse(baseDB)
	if err != nil {
		return nil, err
	}
	admin := *u
	admin.Path = "/postgres"
	c.adminURL = admin.String()
	u.Path = "/" + c.dbName
	c.dbURL = u.String()
	if err := migrations.EnsureDatabase(ctx, c.dbURL); err != nil {
		return nil, err
	}
	if c.pool, err = pgxpool.New(ctx, c.dbURL); err != nil {
		return nil, err
	}
	if err := migrations.Apply(ctx, c.pool); err != nil {
		return nil, err
	}
	grants, err := grant.Parse(mockGrants)
	if err != nil {
		return nil, err
	}
	c.Store = store.New(c.pool).WithGrants(grants).WithOutbound(netguard.New(netguard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	team, err := c.Store.CreateTeam(ctx, store.ActorCLI, "loadtest")
	if err != nil {
		return nil, err
	}
	c.TeamID = team.ID
	// The scenarios set each member's limits themselves and measure the
	// limiter against them: no default tier or team budget on top.
	if err := c.Store.SetDefaultTier(ctx, store.ActorCLI, team.ID, store.TierNone); err != nil {
		return nil, err
	}
	if _, err := c.Store.SetTeamLimits(ctx, store.ActorCLI, team.ID, store.NoLimits()); err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c.mockURL = "http://127.0.0.1:" + port
	os.Remove(filepath.Join(bin, "tollgate.log"))
	if _, err := c.start(ctx, "mockprovider", []string{"-addr", "127.0.0.1:" + port, "-anthropic-key", c.credential,
		// No scenario reads this mock's records, and holding hundreds of thousands
		// of them stalled its answers for tens of milliseconds at a time.
		"-records=false"}, nil, c.mockURL+"/v1/models"); err != nil {
		return nil, err
	}
	_, err = c.Store.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: c.TeamID, Preset: "anthropic", UpstreamURL: c.mockURL})
	return c, err
}

// member adds a member with the given limits and returns a key for them.
func (c *cluster) member(ctx context.Context, email string, l store.Limits) (string, error) {
	m, err := c.Store.AddMember(ctx, store.ActorCLI, c.TeamID, email, store.RoleMember)
	if err != nil {
		return "", err
	}
	if _, err := c.Store.SetMemberLimits(ctx, store.ActorCLI, c.TeamID, m.ID, l); err != nil {
		return "", err
	}
	k, err := c.Store.IssueKey(ctx, store.ActorCLI, c.TeamID, m.ID, "loadtest")
	return k.Plaintext, err
}

// members adds n members with no limits of their own (prefix-i@loadtest.dev)
// and returns a key for each.
func (c *cluster) members(ctx context.Context, prefix string, n int) ([]string, error) {
	keys := make([]string, 0, n)
	for i := range n {
		key, err := c.member(ctx, fmt.Sprintf("%s-%d@loadtest.dev", prefix, i), store.NoLimits())
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// gateway is one `tollgate serve` process the harness started.
type gateway struct {
	Base  string // public listener, http://127.0.0.1:port
	Admin string // ADMIN_ADDR handed to it (host:port); served only once the admin listener exists
	Cmd   *exec.Cmd
}

// startReplicas starts n gateways, with extra environment on top of the
// cluster's; shared says whether they share Redis (the product) or each keep
// limits in their own process (the failure mode).
// mockGrants lets the Anthropic key reach the mock provider on loopback.
const mockGrants = "ANTHROPIC_API_KEY: hosts=127.0.0.1"

func (c *cluster) startReplicas(ctx context.Context, n int, shared bool, extra []string) error {
	for range n {
		g, err := c.startGateway(ctx, n, shared, extra)
		if err != nil {
			return err
		}
		c.Replicas = append(c.Replicas, g.Base)
	}
	return nil
}

// startGateway starts one gateway told that it is one of n replicas, with extra
// environment on top of the cluster's. Every gateway gets its own ADMIN_ADDR so
// replicas never race for the admin listener's default port.
func (c *cluster) startGateway(ctx context.Context, n int, shared bool, extra []string) (gateway, error) {
	return c.startGatewayWith(ctx, "tollgate", []string{"serve"}, n, shared, extra)
}

// startGatewayWith is startGateway with another command line, such as the
// harness's own `profiledserve`.
func (c *cluster) startGatewayWith(ctx context.Context, name string, args []string, n int, shared bool, extra []string) (gateway, error) {
	port, err := freePort()
	if err != nil {
		return gateway{}, err
	}
	adminPort, err := freePort()
	if err != nil {
		return gateway{}, err
	}
	env := []string{"DATABASE_URL=" + c.dbURL, "LISTEN_ADDR=127.0.0.1:" + port, "ANTHROPIC_API_KEY=" + c.credential,
		"CREDENTIAL_GRANTS=" + mockGrants,
		"LOG_LEVEL=error", "OUTBOUND_ALLOW=127.0.0.0/8", "GATEWAY_REPLICAS=" + strconv.Itoa(n), "ADMIN_ADDR=127.0.0.1:" + adminPort,
		// The scenarios measure what 5,000 streams from one member cost; the
		// shedding bounds exist to refuse exactly that.
		"MAX_IN_FLIGHT=0", "MEMBER_MAX_IN_FLIGHT=0"}
	if shared {
		env = append(env, "REDIS_URL="+c.redisURL, "REDIS_KEY_PREFIX="+c.prefix)
	}
	g := gateway{Base: "http://127.0.0.1:" + port, Admin: "127.0.0.1:" + adminPort}
	g.Cmd, err = c.start(ctx, name, args, append(env, extra...), g.Base+"/healthz")
	return g, err
}

// stopReplicas ends the gateways (and any other process started after the
// mock) but keeps the database and mock, so the next variant of a scenario
// starts from fresh counters.
func (c *cluster) stopReplicas() {
	keep := c.procs[:1] // the mock provider
	for _, p := range c.procs[1:] {
		stop(p)
	}
	c.procs, c.Replicas = keep, nil
}

// stopProc ends one process the cluster started.
func (c *cluster) stopProc(p *exec.Cmd) {
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
			break
		}
	}
	stop(p)
}

// start runs a process (a name in the build folder, or a path) with its stderr
// appended to <build folder>/<base name>.log, and waits until readyURL answers.
func (c *cluster) start(ctx context.Context, name string, args, env []string, readyURL string) (*exec.Cmd, error) {
	path := name
	if !strings.Contains(name, "/") {
		path = filepath.Join(c.bin, name)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	logFile, err := os.OpenFile(c.logPath(filepath.Base(name)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = io.Discard, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.procs = append(c.procs, cmd)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(readyURL)
		if err == nil {
			resp.Body.Close()
			return cmd, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return cmd, fmt.Errorf("%s did not come up at %s: %w", name, readyURL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) logPath(name string) string { return filepath.Join(c.bin, name+".log") }

var requestID = regexp.MustCompile(`req_[0-9a-f]{8,}`)

// errorLines counts the gateways' logged errors by message, so a scenario can say
// what went wrong besides its figures.
func (c *cluster) errorLines() map[string]int {
	counts := map[string]int{}
	b, _ := os.ReadFile(c.logPath("tollgate"))
	for _, line := range strings.Split(string(b), "\n") {
		var entry struct {
			Msg, Err string
			Count    int // a folded line stands for Count of them
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
			counts[requestID.ReplaceAllString(entry.Msg+": "+entry.Err, "req_…")] += max(entry.Count, 1)
		}
	}
	return counts
}

// close stops every process by PID and drops the database and Redis keys.
func (c *cluster) close() {
	for _, p := range c.procs {
		stop(p)
	}
	if c.pool != nil {
		c.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, c.adminURL); err == nil {
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{c.dbName}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	if opts, err := redis.ParseURL(c.redisURL); err == nil {
		r := redis.NewClient(opts)
		defer r.Close()
		iter := r.Scan(ctx, 0, c.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			r.Unlink(ctx, iter.Val())
		}
	}
}

func stop(p *exec.Cmd) {
	if p.Process == nil {
		return
	}
	p.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Process.Kill()
		<-done
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
