// Command loadtest runs tollgate's load scenarios on loopback and prints one table
// per scenario; raw results go to loadtest/results/ (git-ignored) as JSON.
//
//	go run ./loadtest [-scenario all|correctness|isolation] [-duration 30s]
//
// Every scenario starts what it needs (its own database, Redis prefix, mock
// provider and gateway processes), runs for a bounded time and stops everything
// it started by PID.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"
)

type options struct {
	duration time.Duration
	dbURL    string
	redisURL string
	out      string
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
	var o options
	which := flag.String("scenario", "all", "all, correctness or isolation")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long each load phase runs")
	flag.StringVar(&o.dbURL, "database", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres server (a database is created per scenario and dropped after)")
	flag.StringVar(&o.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis (keys under a prefix per scenario, removed after)")
	flag.StringVar(&o.out, "out", "loadtest/results", "where JSON results go")
	flag.Parse()

	scenarios := []scenario{{"correctness", correctness}, {"isolation", isolation}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := buildBinaries(ctx)
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(bin)
	ran := 0
	for _, s := range scenarios {
		if *which != "all" && *which != s.name {
			continue
		}
		ran++
		t, err := runScenario(ctx, s, bin, o)
		if err != nil {
			fail(fmt.Errorf("%s: %w", s.name, err))
		}
		print(t)
		if err := save(o.out, s.name, t); err != nil {
			fail(err)
		}
	}
	if ran == 0 {
		fail(fmt.Errorf("no scenario called %q", *which))
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
