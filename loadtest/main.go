// Command loadtest runs tollgate's load scenarios on loopback and prints one table
// per scenario; raw results go to loadtest/results/ (git-ignored) as JSON.
//
//	go run ./loadtest [-scenario all|correctness,isolation,overhead,throughput,memory,propagation,burst,storm,fair,runaway,idle] [-duration 30s] ...
//
// Every scenario starts what it needs (its own database, Redis prefix, mock
// provider, gateway processes and, for the comparisons, a bare ReverseProxy and
// nginx when installed), runs for a bounded time and stops everything it
// started by PID. Three hidden subcommands are processes the harness starts from
// its own binary: `bareproxy` (the bare proxy), `profiledserve` (tollgate
// serve with net/http/pprof beside it, used for CPU and heap profiles while the
// gateway has no /debug/pprof of its own) and `burstclient` (one replica's
// share of burst's requests).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

type options struct {
	duration           time.Duration
	overheadDuration   time.Duration
	rate               int
	throughputDuration time.Duration
	workers            int
	streams            []int
	trials             int
	burst              int
	fairDuration       time.Duration
	idleDuration       time.Duration
	profile            bool
	dbURL              string
	redisURL           string
	out                string
	// gatewayEnv is added to the environment of the gateway that overhead and
	// throughput measure (not the bare proxy's, the mock's or the harness's).
	gatewayEnv []string
}

type scenario struct {
	name string
	run  func(ctx context.Context, c *cluster, o options) (table, error)
}

// table is a scenario's printed result; it is also what the JSON file holds.
type table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	Notes   []string   `json:"notes"`
	Raw     any        `json:"raw"`
}

func main() {
	if len(os.Args) > 1 {
		// Hidden subcommands: processes the scenarios start from this same binary.
		sub := map[string]func([]string) error{"bareproxy": bareProxy, "profiledserve": profiledServe,
			"burstclient": burstClient}[os.Args[1]]
		if sub != nil {
			if err := sub(os.Args[2:]); err != nil {
				fail(err)
			}
			return
		}
	}
	var o options
	which := flag.String("scenario", "all", "all, or a comma-separated list of correctness, isolation, overhead, throughput, memory, propagation, burst, storm, fair, runaway, idle")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long each load phase of correctness and isolation runs (storm: 10s to 20s)")
	flag.DurationVar(&o.overheadDuration, "overhead-duration", 20*time.Second, "overhead: load per path and request kind")
	flag.IntVar(&o.rate, "rate", 1000, "overhead: requests per second, open loop")
	flag.DurationVar(&o.throughputDuration, "throughput-duration", 10*time.Second, "throughput: closed-loop load per path")
	flag.IntVar(&o.workers, "workers", 32, "throughput: concurrent closed-loop workers")
	streams := flag.String("streams", "100,1000,5000", "memory: requests held in flight, comma-separated levels")
	flag.IntVar(&o.trials, "trials", 100, "propagation: trials per kind of change")
	flag.DurationVar(&o.fairDuration, "fair-duration", 60*time.Second, "fair: load under contention; runaway: all its rounds together")
	flag.DurationVar(&o.idleDuration, "idle-duration", 60*time.Second, "idle: how long each level of open dashboards is measured")
	flag.IntVar(&o.burst, "burst", 20000, "burst: requests released at once")
	flag.BoolVar(&o.profile, "profile", true, "overhead: take CPU profiles of the gateway under the load afterwards")
	flag.StringVar(&o.dbURL, "database", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres server (a database is created per scenario and dropped after)")
	flag.StringVar(&o.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis (keys under a prefix per scenario, removed after)")
	flag.StringVar(&o.out, "out", "loadtest/results", "where JSON results go")
	flag.Func("gateway-env", "overhead, throughput: NAME=value added to the measured gateway's environment alone, e.g. GOGC=400 (repeatable)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("%q is not NAME=value", v)
		}
		o.gatewayEnv = append(o.gatewayEnv, v)
		return nil
	})
	flag.Parse()
	for _, f := range strings.Split(*streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("-streams: %q is not a positive number", f))
		}
		o.streams = append(o.streams, n)
	}
	if _, err := raiseFileLimit(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: could not raise the open-file limit:", err)
	}

	scenarios := []scenario{{"correctness", correctness}, {"isolation", isolation}, {"overhead", overhead},
		{"throughput", throughput}, {"memory", memory}, {"propagation", propagation}, {"burst", burst}, {"storm", storm},
		{"fair", fair}, {"runaway", runaway}, {"idle", idle}}
	chosen := map[string]bool{}
	for _, name := range strings.Split(*which, ",") {
		name = strings.TrimSpace(name)
		if name != "all" && !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == name }) {
			fail(fmt.Errorf("no scenario called %q", name))
		}
		chosen[name] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := buildBinaries(ctx)
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(bin)
	for _, s := range scenarios {
		if !chosen["all"] && !chosen[s.name] {
			continue
		}
		t, err := runScenario(ctx, s, bin, o)
		if err != nil {
			fail(fmt.Errorf("%s: %w", s.name, err))
		}
		print(t)
		if err := save(o.out, s.name, t); err != nil {
			fail(err)
		}
	}
}

// runScenario gives the scenario a fresh cluster, and notes the machine's load
// and the gateways' logged errors next to its figures.
func runScenario(ctx context.Context, s scenario, bin string, o options) (table, error) {
	load := startLoadMeter()
	c, err := newCluster(ctx, bin, o.dbURL, o.redisURL)
	if err != nil {
		return table{}, err
	}
	defer c.close()
	t, err := s.run(ctx, c, o)
	if err != nil {
		return t, err
	}
	for line, n := range c.errorLines() {
		t.Notes = append(t.Notes, fmt.Sprintf("gateways logged %d× %q", n, line))
	}
	t.Notes = append(t.Notes, load.report())
	return t, nil
}

func print(t table) {
	fmt.Printf("\n## %s\n\n", t.Title)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for i, c := range t.Columns {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
	for _, r := range t.Rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(w, "\t")
			}
			fmt.Fprint(w, c)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	for _, n := range t.Notes {
		fmt.Println("- " + n)
	}
}

func save(dir, name string, t table) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name+"-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	return os.WriteFile(path, b, 0o644)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadtest:", err)
	os.Exit(1)
}
