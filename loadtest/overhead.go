package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/internal/redisstats"
)

const streamBody = `{"model":"claude-sonnet-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// reqKind is one kind of request the overhead scenarios send on every path.
type reqKind struct {
	name   string
	method string
	path   string // below the provider's base: /v1/...
	body   string
}

var (
	tinyGET      = reqKind{"tiny GET /v1/models", http.MethodGet, "/v1/models", ""}
	llmPOST      = reqKind{"POST /v1/messages", http.MethodPost, "/v1/messages", messagesBody}
	streamedPOST = reqKind{"streamed POST /v1/messages", http.MethodPost, "/v1/messages", streamBody}
)

// path is one way to reach the mock provider: directly, or through a proxy
// process whose CPU is what the figures charge to it.
type path struct {
	name   string
	base   string // URL the request kind's path is appended to
	header http.Header
	pids   func() []int // the proxy's processes; nil for the direct path
	client *http.Client // kept across rounds so connections stay warm
	admin  string       // the gateway's admin listener, scraped around each phase; "" for the others
}

func (p path) targeter(k reqKind) vegeta.Targeter {
	t := vegeta.Target{Method: k.method, URL: p.base + k.path, Header: p.header}
	if k.body != "" {
		t.Body = []byte(k.body)
	}
	return vegeta.NewStaticTargeter(t)
}

// newLoadClient is the load generator's HTTP client: a keep-alive pool large
// enough that no request waits for a connection.
func newLoadClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        10000,
		MaxIdleConnsPerHost: 10000,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// bench is what the overhead and throughput scenarios run against: the mock
// (already in the cluster), a bare ReverseProxy, one gateway with full
// admission for a member, and nginx when it is installed.
type bench struct {
	paths    []path // direct, bare ReverseProxy, gateway[, nginx]
	gateway  gateway
	mockPID  int
	redis    *redis.Client
	nginx    bool
	mockBase string
	logs     func() map[string]int // the gateways' logged errors so far, by message
}

func (b *bench) close() { b.redis.Close() }

func newBench(ctx context.Context, c *cluster, o options) (*bench, error) {
	// Limits that every request passes through but that never refuse: from the
	// member's tier (weight 4), a rate limit, a token-rate limit and a budget (so
	// each POST holds, settles and writes a ledger row); and the team's rate
	// limit, token-rate limit and budget on top, which the fair waiting room
	// (FAIR_QUEUE_WAIT, on by default) shares out, idle here.
	budget, teamBudget := int64(1_000_000_000_000), int64(2_000_000_000_000)
	tier := weighted("overhead", 4)
	tier.Limits = store.Limits{RateAlgorithm: "token_bucket", RateLimit: 100_000, RatePeriod: time.Second,
		TokensPerMinute: 30_000_000, Budget: &budget, BudgetPeriod: "total"}
	key, err := c.memberInTier(ctx, "overhead@loadtest.dev", tier)
	if err != nil {
		return nil, err
	}
	if _, err := c.Store.SetTeamLimits(ctx, store.ActorCLI, c.TeamID, store.Limits{RateAlgorithm: "token_bucket",
		RateLimit: 1_000_000, RatePeriod: time.Second, TokensPerMinute: 36_000_000, Budget: &teamBudget, BudgetPeriod: "total"}); err != nil {
		return nil, err
	}
	opts, err := redis.ParseURL(c.redisURL)
	if err != nil {
		return nil, err
	}
	b := &bench{mockPID: c.procs[0].Process.Pid, redis: redis.NewClient(opts), mockBase: c.mockURL}
	common := func(h http.Header) http.Header {
		h.Set("Anthropic-Version", "2023-06-01")
		h.Set("Content-Type", "application/json")
		return h
	}
	b.paths = append(b.paths, path{name: "direct", base: c.mockURL, client: newLoadClient(),
		header: common(http.Header{"X-Api-Key": {c.credential}})})

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	bare := "http://127.0.0.1:" + port + "/anthropic"
	bareCmd, err := c.start(ctx, self, []string{"bareproxy", "-addr", "127.0.0.1:" + port, "-upstream", c.mockURL,
		"-strip", "/anthropic", "-api-key", c.credential}, nil, bare+"/v1/models")
	if err != nil {
		return nil, err
	}
	b.paths = append(b.paths, path{name: "bare ReverseProxy", base: bare, client: newLoadClient(),
		header: common(http.Header{}), pids: func() []int { return []int{bareCmd.Process.Pid} }})

	if b.gateway, err = c.startGateway(ctx, 1, true, o.gatewayEnv); err != nil {
		return nil, err
	}
	gwPID := b.gateway.Cmd.Process.Pid
	b.paths = append(b.paths, path{name: "tollgate (full admission)", base: b.gateway.Base + "/anthropic", client: newLoadClient(),
		header: common(http.Header{"X-Api-Key": {key}}), pids: func() []int { return []int{gwPID} }, admin: b.gateway.Admin})
	b.logs = c.errorLines

	nginxBase, nginxCmd, ok, err := c.startNginx(ctx)
	if err != nil {
		return nil, err
	}
	if b.nginx = ok; ok {
		b.paths = append(b.paths, path{name: "nginx", base: nginxBase, client: newLoadClient(), header: common(http.Header{}),
			pids: func() []int { return withChildren(nginxCmd.Process.Pid) }})
	}
	// Every path must answer 200 before anything is measured.
	for _, p := range b.paths {
		for _, k := range []reqKind{tinyGET, llmPOST, streamedPOST} {
			if err := p.check(k); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

func (p path) check(k reqKind) error {
	req, err := http.NewRequest(k.method, p.base+k.path, strings.NewReader(k.body))
	if err != nil {
		return err
	}
	req.Header = p.header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", p.name, k.name, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", p.name, k.name, resp.StatusCode, body)
	}
	return nil
}

// phase accumulates one path's results over the rounds of a scenario.
type phase struct {
	Path     string          `json:"path"`
	Kind     string          `json:"request"`
	Metrics  *vegeta.Metrics `json:"metrics"`
	Elapsed  time.Duration   `json:"elapsed_ns"`
	ProxyCPU time.Duration   `json:"proxy_cpu_ns"`
	MockCPU  time.Duration   `json:"mock_cpu_ns"`
	RedisCPU time.Duration   `json:"redis_cpu_ns"`
	// PostgresCPU is every postgres process's (the ledger's writes, on a shared
	// server); LoadCPU is the harness's own, which is the load generator.
	PostgresCPU time.Duration `json:"postgres_cpu_ns"`
	LoadCPU     time.Duration `json:"load_cpu_ns"`
	Succeeded   int           `json:"succeeded"`
	// Scripts run by the (shared) Redis server during the phase and the time
	// spent inside them.
	RedisScripts     int64 `json:"redis_script_calls"`
	RedisScriptsUsec int64 `json:"redis_script_usec"`
	// Gateway only: how its own counters (Redis pool, fail-closed admissions,
	// slow admissions) and its logged errors moved during the phase.
	GatewayMetrics map[string]float64 `json:"gateway_metrics,omitempty"`
	GatewayErrors  map[string]int     `json:"gateway_errors,omitempty"`
}

// run sends load on p for d, open loop at rate per second, or closed loop with
// workers back-to-back when rate is 0, and adds the results and CPU to ph.
func (b *bench) run(p path, k reqKind, rate int, workers uint64, d time.Duration, ph *phase) {
	opts := []func(*vegeta.Attacker){vegeta.Client(p.client), vegeta.MaxWorkers(max(workers, 512))}
	if rate == 0 {
		opts = []func(*vegeta.Attacker){vegeta.Client(p.client), vegeta.Workers(workers), vegeta.MaxWorkers(workers)}
	}
	attacker := vegeta.NewAttacker(opts...)
	var pids []int
	if p.pids != nil {
		pids = p.pids()
	}
	ctx := context.Background()
	cpu0, mock0, redis0, start := procCPU(pids...), procCPU(b.mockPID), redisCPU(ctx, b.redis), time.Now()
	pg0, load0 := procCPU(named("postgres")...), procCPU(os.Getpid())
	calls0, usec0 := redisstats.Scripts(ctx, b.redis)
	var metrics0 map[string]float64
	var logs0 map[string]int
	if p.admin != "" {
		metrics0, logs0 = scrapeGateway(p.admin), b.logs()
	}
	for res := range attacker.Attack(p.targeter(k), vegeta.Rate{Freq: rate, Per: time.Second}, d, p.name) {
		ph.Metrics.Add(res)
		if res.Code == http.StatusOK && res.Error == "" {
			ph.Succeeded++
		}
	}
	ph.Elapsed += time.Since(start)
	ph.ProxyCPU += procCPU(pids...) - cpu0
	ph.MockCPU += procCPU(b.mockPID) - mock0
	ph.RedisCPU += redisCPU(ctx, b.redis) - redis0
	ph.PostgresCPU += procCPU(named("postgres")...) - pg0
	ph.LoadCPU += procCPU(os.Getpid()) - load0
	calls1, usec1 := redisstats.Scripts(ctx, b.redis)
	ph.RedisScripts += calls1 - calls0
	ph.RedisScriptsUsec += usec1 - usec0
	if p.admin != "" {
		if ph.GatewayMetrics == nil {
			ph.GatewayMetrics, ph.GatewayErrors = map[string]float64{}, map[string]int{}
		}
		for name, v := range scrapeGateway(p.admin) {
			if strings.HasSuffix(name, "_conns") || strings.Contains(name, "_conns{") {
				ph.GatewayMetrics[name] = v // a gauge: its value at the end
				continue
			}
			ph.GatewayMetrics[name] += v - metrics0[name]
		}
		for line, n := range b.logs() {
			if d := n - logs0[line]; d > 0 {
				ph.GatewayErrors[line] += d
			}
		}
	}
}

// gatewayCounters are the gateway's metrics a phase reports on: its Redis
// connection pool, admissions refused because Redis did not answer in time, and
// how long admission calls and whole requests took.
var gatewayCounters = []string{"tollgate_redis_pool_", `tollgate_redis_fallback_decisions_total{decision="fail_closed"}`,
	`tollgate_admission_duration_seconds_bucket{le="0.1"}`, "tollgate_admission_duration_seconds_count",
	"tollgate_request_duration_seconds_bucket", "tollgate_request_duration_seconds_count"}

// overGateway is how many requests took longer than le seconds by the gateway's
// own clock (arrival to the end of the response), summed over its routes: a
// client-side tail the gateway does not see was spent before its handler ran.
func overGateway(m map[string]float64, le string) float64 {
	var count, within float64
	for name, v := range m {
		switch {
		case strings.HasPrefix(name, "tollgate_request_duration_seconds_count"):
			count += v
		case strings.HasPrefix(name, "tollgate_request_duration_seconds_bucket") && strings.Contains(name, `le="`+le+`"`):
			within += v
		}
	}
	return count - within
}

// scrapeGateway reads gatewayCounters from the gateway's admin /metrics.
func scrapeGateway(admin string) map[string]float64 {
	out := map[string]float64{}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + admin + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		for _, c := range gatewayCounters {
			if strings.HasPrefix(name, c) {
				if v, err := strconv.ParseFloat(value, 64); err == nil {
					out[name] = v
				}
			}
		}
	}
	return out
}

// gatewayNote summarises a gateway phase's counters in one line.
func gatewayNote(kind string, ph *phase) string {
	m := ph.GatewayMetrics
	slow := m["tollgate_admission_duration_seconds_count"] - m[`tollgate_admission_duration_seconds_bucket{le="0.1"}`]
	var errs []string
	for line, n := range ph.GatewayErrors {
		errs = append(errs, fmt.Sprintf("%d× %q", n, line))
	}
	slices.Sort(errs)
	return fmt.Sprintf("%s, gateway: %.0f requests over 25 ms and %.0f over 100 ms by its own clock; %.0f admissions, %.0f over 100 ms, %.0f failed closed; Redis pool: %.0f hits, %.0f misses (dials), "+
		"%.0f waits (%.1f ms in all), %.0f timeouts, %.0f stale, %.0f unusable, %.0f conns open at the end; logged errors: %s",
		kind, overGateway(m, "0.025"), overGateway(m, "0.1"), m["tollgate_admission_duration_seconds_count"], slow, m[`tollgate_redis_fallback_decisions_total{decision="fail_closed"}`],
		m["tollgate_redis_pool_hits_total"], m["tollgate_redis_pool_misses_total"], m["tollgate_redis_pool_waits_total"],
		1000*m["tollgate_redis_pool_wait_seconds_total"], m["tollgate_redis_pool_timeouts_total"], m["tollgate_redis_pool_stale_conns_total"],
		m["tollgate_redis_pool_unusable_total"], m[`tollgate_redis_pool_conns{state="total"}`], strings.Join(append(errs, "none")[:max(len(errs), 1)], ", "))
}

// sweep runs every path on k in rounds (each path a slice of d per round, in
// turn) so that a change in the machine's other load falls on all paths alike.
func (b *bench) sweep(k reqKind, rate int, workers uint64, d, warmup time.Duration) []*phase {
	rounds := max(1, int(d/(5*time.Second)))
	phases := make([]*phase, len(b.paths))
	for i, p := range b.paths {
		phases[i] = &phase{Path: p.name, Kind: k.name, Metrics: &vegeta.Metrics{}}
		if warmup > 0 {
			b.run(p, k, rate, workers, warmup, &phase{Metrics: &vegeta.Metrics{}})
		}
	}
	for range rounds {
		for i, p := range b.paths {
			b.run(p, k, rate, workers, d/time.Duration(rounds), phases[i])
		}
	}
	for _, ph := range phases {
		ph.Metrics.Close()
	}
	return phases
}

func perRequest(cpu time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f µs", float64(cpu)/float64(time.Microsecond)/float64(n))
}

func signedMs(d time.Duration) string {
	return fmt.Sprintf("%+.2f ms", float64(d)/float64(time.Millisecond))
}

// overhead measures the latency and CPU each path adds to the direct path, open
// loop at a constant rate, on a tiny GET, a JSON POST and a streamed POST.
func overhead(ctx context.Context, c *cluster, o options) (table, error) {
	b, err := newBench(ctx, c, o)
	if err != nil {
		return table{}, err
	}
	defer b.close()
	t := table{
		Title: fmt.Sprintf("Overhead: open loop, %d req/s for %s per path and request, loopback, mock answering at once", o.rate, o.overheadDuration),
		Columns: []string{"request", "path", "sent", "200", "p50", "p99", "added p50", "added p99", "proxy CPU/req",
			"Redis CPU/req"},
	}
	var raw []*phase
	verdicts := []string{}
	for _, k := range []reqKind{tinyGET, llmPOST, streamedPOST} {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		phases := b.sweep(k, o.rate, 0, o.overheadDuration, time.Second)
		raw = append(raw, phases...)
		direct := phases[0].Metrics.Latencies
		for i, ph := range phases {
			l := ph.Metrics.Latencies
			row := []string{k.name, ph.Path, strconv.FormatUint(ph.Metrics.Requests, 10), strconv.Itoa(ph.Succeeded), ms(l.P50), ms(l.P99)}
			if i == 0 {
				row = append(row, "-", "-", "mock "+perRequest(ph.MockCPU, ph.Succeeded), "-")
			} else {
				row = append(row, signedMs(l.P50-direct.P50), signedMs(l.P99-direct.P99), perRequest(ph.ProxyCPU, ph.Succeeded), "-")
				if ph.Path == b.paths[2].name {
					row[len(row)-1] = perRequest(ph.RedisCPU, ph.Succeeded)
				}
			}
			t.Rows = append(t.Rows, row)
		}
		bare, gw := phases[1], phases[2]
		if k != tinyGET {
			dp50 := gw.Metrics.Latencies.P50 - bare.Metrics.Latencies.P50
			dp99 := gw.Metrics.Latencies.P99 - bare.Metrics.Latencies.P99
			p99Verdict := metOrMissed(dp99 <= time.Millisecond, dp99-time.Millisecond)
			if direct.P99 > 5*time.Millisecond {
				// A loopback mock answers in about a millisecond: a direct p99 far
				// above it is the machine's other load, which swamps a 1 ms target.
				p99Verdict = "inconclusive, the direct path's own p99 is " + ms(direct.P99)
			}
			verdicts = append(verdicts, fmt.Sprintf("%s: gateway added p50 − bare added p50 = %s (target ≤ +0.15 ms: %s); added p99 − bare = %s (target ≤ +1 ms: %s)",
				k.name, signedMs(dp50), metOrMissed(dp50 <= 150*time.Microsecond, dp50-150*time.Microsecond), signedMs(dp99), p99Verdict))
		}
		perReq := float64(gw.RedisScriptsUsec) / float64(max(gw.Succeeded, 1))
		verdicts = append(verdicts, fmt.Sprintf("%s: Redis ran %.2f scripts per gateway request, %.0f µs each inside Redis, %.0f µs per request "+
			"(target ≤ 30: %s; INFO commandstats; shared server)",
			k.name, float64(gw.RedisScripts)/float64(max(gw.Succeeded, 1)), float64(gw.RedisScriptsUsec)/float64(max(gw.RedisScripts, 1)),
			perReq, metOrMissedRatio(perReq/30, 1)))
		verdicts = append(verdicts, gatewayNote(k.name, gw))
		ratio := cpuRatio(gw, bare)
		verdicts = append(verdicts, fmt.Sprintf("%s: gateway CPU/req = %.2f × bare (target ≤ 1.3: %s); with its Redis CPU %.2f ×",
			k.name, ratio, metOrMissedRatio(ratio, 1.3), cpuRatioWithRedis(gw, bare)))
	}
	t.Raw = raw
	t.Notes = append(t.Notes, verdicts...)
	t.Notes = append(t.Notes,
		"added = path − direct, same request, same run; p50/p99 from vegeta's t-digest over all rounds; paths take turns in 5 s rounds",
		"proxy CPU/req = utime+stime of the proxy's process(es) from /proc/<pid>/stat over the phase ÷ requests answered 200 (direct row: the mock's own CPU); Redis CPU/req is the shared Redis server's INFO cpu delta, others' use included",
		"the load generator (vegeta, in the harness process) and all processes share the machine's 2 cores")
	if !b.nginx {
		t.Notes = append(t.Notes, "nginx: not installed")
	}
	if o.profile {
		notes, err := profileGateway(ctx, c, b, o)
		if err != nil {
			notes = append(notes, "CPU profile failed: "+err.Error())
		}
		t.Notes = append(t.Notes, notes...)
	}
	return t, nil
}

func cpuRatio(gw, bare *phase) float64 {
	g := float64(gw.ProxyCPU) / float64(max(gw.Succeeded, 1))
	r := float64(bare.ProxyCPU) / float64(max(bare.Succeeded, 1))
	if r == 0 {
		return 0
	}
	return g / r
}

func cpuRatioWithRedis(gw, bare *phase) float64 {
	g := float64(gw.ProxyCPU+gw.RedisCPU) / float64(max(gw.Succeeded, 1))
	r := float64(bare.ProxyCPU) / float64(max(bare.Succeeded, 1))
	if r == 0 {
		return 0
	}
	return g / r
}

func metOrMissed(ok bool, by time.Duration) string {
	if ok {
		return "met"
	}
	return "missed by " + ms(by)
}

func metOrMissedRatio(got, target float64) string {
	if got <= target {
		return "met"
	}
	return fmt.Sprintf("missed by %.2f×", got-target)
}

// throughput runs every path closed loop: a fixed number of workers each
// sending the next request as soon as the last one is answered.
func throughput(ctx context.Context, c *cluster, o options) (table, error) {
	b, err := newBench(ctx, c, o)
	if err != nil {
		return table{}, err
	}
	defer b.close()
	phases := b.sweep(llmPOST, 0, uint64(o.workers), o.throughputDuration, time.Second)
	t := table{
		Title: fmt.Sprintf("Throughput: closed loop, %d workers back-to-back, %s per path, POST /v1/messages", o.workers, o.throughputDuration),
		Columns: []string{"path", "200", "other", "req/s", "vs bare ReverseProxy", "p50", "p99", "proxy CPU/req",
			"Redis", "Postgres", "mock", "load gen", "box CPU/req"},
		Raw: phases,
	}
	rps := func(ph *phase) float64 { return float64(ph.Succeeded) / ph.Elapsed.Seconds() }
	box := func(ph *phase) time.Duration {
		return ph.ProxyCPU + ph.RedisCPU + ph.PostgresCPU + ph.MockCPU + ph.LoadCPU
	}
	for _, ph := range phases {
		proxy := perRequest(ph.ProxyCPU, ph.Succeeded)
		if ph.Path == "direct" {
			proxy = "-"
		}
		t.Rows = append(t.Rows, []string{ph.Path, strconv.Itoa(ph.Succeeded), strconv.Itoa(int(ph.Metrics.Requests) - ph.Succeeded),
			fmt.Sprintf("%.0f", rps(ph)), fmt.Sprintf("%.2f", rps(ph)/rps(phases[1])), ms(ph.Metrics.Latencies.P50), ms(ph.Metrics.Latencies.P99),
			proxy, perRequest(ph.RedisCPU, ph.Succeeded), perRequest(ph.PostgresCPU, ph.Succeeded), perRequest(ph.MockCPU, ph.Succeeded),
			perRequest(ph.LoadCPU, ph.Succeeded), perRequest(box(ph), ph.Succeeded)})
	}
	ratio := rps(phases[2]) / rps(phases[1])
	t.Notes = append(t.Notes, gatewayNote(llmPOST.name, phases[2]))
	// The box's cores are shared, so a path's rate follows its whole box CPU per
	// request. Were the gateway's own process as cheap as the bare proxy, and the
	// mock and load generator as cheap per request as at the bare proxy's rate,
	// the Redis and Postgres servers' work alone would still cost this much.
	bare, gw := phases[1], phases[2]
	perReq := func(d time.Duration, ph *phase) float64 { return float64(d) / float64(max(ph.Succeeded, 1)) }
	servers := perReq(gw.RedisCPU+gw.PostgresCPU, gw)
	t.Notes = append(t.Notes, fmt.Sprintf("box CPU/req = the proxy's, Redis's (INFO cpu), every postgres process's, the mock's and the harness's own (the load generator) CPU over the phase ÷ requests answered 200; "+
		"the gateway's Redis and Postgres work alone is %.0f µs a request, so even a gateway process as cheap as the bare proxy would reach at most %.2f × its throughput here",
		servers/1e3, perReq(box(bare), bare)/(perReq(box(bare), bare)+servers)))
	verdict := "met"
	if ratio < 0.75 {
		verdict = fmt.Sprintf("missed by %.2f", 0.75-ratio)
	}
	t.Notes = append(t.Notes, fmt.Sprintf("gateway throughput = %.2f × bare ReverseProxy (target ≥ 0.75: %s)", ratio, verdict),
		"the load generator runs on the same 2 cores, so these are ratios, not the gateway's capacity on a dedicated machine")
	return t, nil
}

// profileGateway takes CPU profiles of the gateway under the overhead load (the
// JSON POST, then the streamed POST), from the gateway's admin listener when it
// serves /debug/pprof, else from a `profiledserve` gateway (the same serve code
// with net/http/pprof beside it) started for the purpose.
func profileGateway(ctx context.Context, c *cluster, b *bench, o options) ([]string, error) {
	g, how := b.gateway, "the gateway's admin listener (ADMIN_ADDR)"
	if !servesPprof(g.Admin) {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		g, err = c.startGatewayWith(ctx, self, []string{"profiledserve", "-pprof", "127.0.0.1:" + port}, 1, true, nil)
		if err != nil {
			return nil, err
		}
		defer c.stopProc(g.Cmd)
		g.Admin, how = "127.0.0.1:"+port, "a `go run ./loadtest profiledserve` gateway (tollgate serve with net/http/pprof beside it; the gateway has no /debug/pprof yet)"
	}
	p := b.paths[2]
	p.base, p.client = g.Base+"/anthropic", newLoadClient()
	notes := []string{}
	for _, k := range []reqKind{llmPOST, streamedPOST} {
		file, top, err := profileUnder(ctx, g.Admin, o, func(d time.Duration) {
			b.run(p, k, o.rate, 0, d, &phase{Metrics: &vegeta.Metrics{}})
		})
		if err != nil {
			return notes, err
		}
		fmt.Printf("\n### gateway CPU profile, %s at %d req/s (%s)\n%s\n", k.name, o.rate, file, top)
		notes = append(notes, fmt.Sprintf("CPU profile of the gateway under %s at %d req/s, from %s: %s (top by cumulative time printed and saved beside it)",
			k.name, o.rate, how, file))
	}
	return notes, nil
}

func servesPprof(admin string) bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + admin + "/debug/pprof/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// profileUnder runs load for 12 s and takes a 10 s CPU profile in its middle,
// saved under o.out with its `go tool pprof -top -cum` beside it.
func profileUnder(ctx context.Context, admin string, o options, load func(time.Duration)) (file, top string, err error) {
	const secs = 10
	done := make(chan struct{})
	go func() { defer close(done); load((secs + 2) * time.Second) }()
	defer func() { <-done }()
	time.Sleep(time.Second)
	resp, err := (&http.Client{Timeout: (secs + 30) * time.Second}).Get("http://" + admin + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", "", err
	}
	file = filepath.Join(o.out, "overhead-gateway-cpu-"+time.Now().UTC().Format("20060102T150405Z")+".pprof")
	f, err := os.Create(file)
	if err != nil {
		return "", "", err
	}
	_, err = io.Copy(f, resp.Body)
	f.Close()
	if err != nil {
		return "", "", err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=40", file).Output()
	if err != nil {
		return file, "", fmt.Errorf("go tool pprof: %w", err)
	}
	top = string(out)
	return file, top, os.WriteFile(strings.TrimSuffix(file, ".pprof")+"-top.txt", out, 0o644)
}
