package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

// outcome is one open-loop attack's result.
type outcome struct {
	Name    string         `json:"name"`
	Offered int            `json:"offered_per_s"`
	Sent    uint64         `json:"sent"`
	Codes   map[string]int `json:"status_codes"`
	P50     time.Duration  `json:"p50_ns"`
	P99     time.Duration  `json:"p99_ns"`
	Errors  []string       `json:"errors"`
}

func (o outcome) count(code int) int { return o.Codes[strconv.Itoa(code)] }

// attack sends rate requests per second for d at a constant arrival rate (open
// loop, so a slow gateway cannot slow the load down and hide its latency),
// round-robin over the replicas, with the member's key.
func attack(name string, replicas []string, key string, rate int, d time.Duration) outcome {
	return attackPath(name, replicas, key, "/anthropic", rate, d)
}

// attackPath is attack on the Anthropic route at prefix.
func attackPath(name string, replicas []string, key, prefix string, rate int, d time.Duration) outcome {
	header := http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
	targets := make([]vegeta.Target, len(replicas))
	for i, r := range replicas {
		targets[i] = vegeta.Target{Method: http.MethodPost, URL: r + prefix + "/v1/messages", Body: []byte(messagesBody), Header: header}
	}
	attacker := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Timeout(10*time.Second), vegeta.MaxWorkers(512))
	var m vegeta.Metrics
	for res := range attacker.Attack(vegeta.NewStaticTargeter(targets...), vegeta.Rate{Freq: rate, Per: time.Second}, d, name) {
		m.Add(res)
	}
	m.Close()
	return outcome{Name: name, Offered: rate, Sent: m.Requests, Codes: m.StatusCodes, P50: m.Latencies.P50, P99: m.Latencies.P99, Errors: m.Errors}
}

// attackAll runs several attacks at once and waits for all of them.
func attackAll(fns ...func() outcome) []outcome {
	out := make([]outcome, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { out[i] = f() })
	}
	wg.Wait()
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// loadMeter measures how busy the machine's CPUs were during a scenario, so a run
// disturbed by other work is visible next to its figures.
type loadMeter struct {
	start     time.Time
	busy, all uint64
}

func startLoadMeter() loadMeter {
	busy, all := cpuTimes()
	return loadMeter{start: time.Now(), busy: busy, all: all}
}

func (l loadMeter) report() string {
	busy, all := cpuTimes()
	if all == l.all {
		return "machine CPU use: unknown"
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("machine CPU busy %.0f%% over %s (everything, this scenario included); load average %s",
		100*float64(busy-l.busy)/float64(all-l.all), time.Since(l.start).Round(time.Second), strings.Join(strings.Fields(string(load))[:3], " "))
}

// cpuTimes reads the aggregate busy and total jiffies from /proc/stat.
func cpuTimes() (busy, all uint64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return 0, 0
	}
	fields := strings.Fields(s.Text())[1:]
	for i, v := range fields {
		n, _ := strconv.ParseUint(v, 10, 64)
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all
}
