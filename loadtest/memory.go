package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// streamHold is how long each slow request would last if not cut: longer than a
// level's ramp, settling and measuring.
const streamHold = 180 * time.Second

// memSample is one reading of the gateway's memory.
type memSample struct {
	RSS int64 `json:"rss_bytes"`
	// After a forced GC (/debug/pprof/heap?gc=1): heap spans in use and stack
	// memory in use.
	HeapInuse  int64 `json:"heap_inuse_bytes"`
	StackInuse int64 `json:"stack_inuse_bytes"`
	Goroutines int64 `json:"goroutines"`
}

func (s memSample) heapStacks() int64 { return s.HeapInuse + s.StackInuse }

type memResult struct {
	Kind     string        `json:"kind"`
	N        int           `json:"n"`
	Ready    int64         `json:"ready"`
	Failed   int64         `json:"failed"`
	FirstErr string        `json:"first_error,omitempty"`
	Idle     memSample     `json:"idle"`
	Loaded   memSample     `json:"loaded"`
	Ramp     time.Duration `json:"ramp_ns"`
	// HeapProfile is where the loaded heap profile went, if one was taken.
	HeapProfile string `json:"heap_profile,omitempty"`
}

// memory holds N slow requests in flight through one gateway and reads what
// they cost it: streamed ones (an SSE event a second) and non-streamed ones (the
// upstream holds its answer), each level on a fresh process so the previous
// level's freed memory does not hide this one's; the bare ReverseProxy is
// measured the same way as the reference. Heap and stacks come from
// /debug/pprof after a forced GC: the gateway's admin listener when it serves
// it, else a `profiledserve` gateway (the same serve code with pprof).
func memory(ctx context.Context, c *cluster, o options) (table, error) {
	budget := int64(1_000_000_000_000)
	key, err := c.member(ctx, "memory@loadtest.dev", store.Limits{RateAlgorithm: "token_bucket", RateLimit: 100_000,
		RatePeriod: time.Second, TokensPerMinute: 30_000_000, Budget: &budget, BudgetPeriod: "total"})
	if err != nil {
		return table{}, err
	}
	t := table{
		Title: "Memory: slow requests held in flight (streams: one SSE event per second), one proxy process",
		Columns: []string{"request", "proxy", "in flight", "heap+stacks idle → loaded", "heap+stacks per request", "of which stacks",
			"goroutines per request", "RSS idle → loaded", "RSS per request"},
	}
	var raw []memResult
	var worst float64
	source := ""
	biggest := slices.Max(o.streams)
	for _, streamed := range []bool{true, false} {
		for _, n := range o.streams {
			for _, gw := range []bool{true, false} {
				if ctx.Err() != nil {
					return t, ctx.Err()
				}
				start := startBare
				if gw {
					start = startProfiledGateway
				}
				heapProfile := gw && streamed && n == biggest
				r, how, err := memoryLevel(ctx, c, o, key, streamed, n, start, heapProfile)
				if err != nil {
					return t, err
				}
				raw = append(raw, r)
				ready := float64(max(r.Ready, 1))
				per := func(a, b int64) float64 { return float64(b-a) / ready }
				kind := "non-streamed (upstream holds headers)"
				if streamed {
					kind = "streamed (1 event/s)"
				}
				proxy := "bare ReverseProxy"
				if gw {
					proxy, source = "tollgate", how
					if streamed {
						worst = max(worst, per(r.Idle.heapStacks(), r.Loaded.heapStacks()))
					}
				}
				t.Rows = append(t.Rows, []string{kind, proxy, fmt.Sprintf("%d of %d", r.Ready, n),
					mib(r.Idle.heapStacks()) + " → " + mib(r.Loaded.heapStacks()), kib(per(r.Idle.heapStacks(), r.Loaded.heapStacks())),
					kib(per(r.Idle.StackInuse, r.Loaded.StackInuse)), fmt.Sprintf("%.1f", per(r.Idle.Goroutines, r.Loaded.Goroutines)),
					mib(r.Idle.RSS) + " → " + mib(r.Loaded.RSS), kib(per(r.Idle.RSS, r.Loaded.RSS))})
				if r.Failed > 0 {
					t.Notes = append(t.Notes, fmt.Sprintf("%s, %s × %d: %d requests failed to get going, first: %s", kind, proxy, n, r.Failed, r.FirstErr))
				}
				if r.HeapProfile != "" {
					t.Notes = append(t.Notes, "heap profile of the gateway with "+strconv.Itoa(n)+" streams in flight: "+r.HeapProfile+" (top by in-use space printed and saved beside it)")
				}
			}
		}
	}
	t.Raw = raw
	verdict := "met"
	if worst > 64<<10 {
		verdict = "missed by " + kib(worst-64<<10)
	}
	t.Notes = append(t.Notes,
		fmt.Sprintf("tollgate heap+stacks per idle in-flight stream, worst level: %s (target ≤ 64 KiB: %s)", kib(worst), verdict),
		"heap+stacks = HeapInuse + StackInuse after a forced GC, for tollgate from "+source+"; per request = (loaded − idle of the same fresh process) ÷ requests in flight; "+
			"RSS (from /proc) is what the OS sees, including garbage and freed pages not yet returned")
	return t, nil
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
func mib(b int64) string   { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// starter starts a proxy process that serves /debug/pprof and says how.
type starter func(ctx context.Context, c *cluster) (gateway, string, error)

// memoryLevel runs one level on a fresh proxy process.
func memoryLevel(ctx context.Context, c *cluster, o options, key string, streamed bool, n int, start starter, heapProfile bool) (memResult, string, error) {
	r := memResult{Kind: "non-streamed", N: n}
	if streamed {
		r.Kind = "streamed"
	}
	g, how, err := start(ctx, c)
	if err != nil {
		return r, how, err
	}
	defer c.stopProc(g.Cmd)
	pid := g.Cmd.Process.Pid
	// Warm the process: connection pools, the route snapshot, a few settled POSTs.
	warm := path{name: "warm-up", base: g.Base + "/anthropic", client: newLoadClient(),
		header: http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}}
	for range 50 {
		for _, k := range []reqKind{tinyGET, llmPOST} {
			if err := warm.check(k); err != nil {
				return r, how, err
			}
		}
	}
	time.Sleep(time.Second)
	if r.Idle, err = sampleMemory(pid, g.Admin); err != nil {
		return r, how, err
	}

	began := time.Now()
	s := openSlow(g.Base, key, streamed, n)
	defer s.close()
	deadline := time.Now().Add(90 * time.Second)
	for s.ready.Load()+s.failed.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	r.Ramp = time.Since(began)
	time.Sleep(2 * time.Second) // let the last requests reach the upstream
	r.Ready, r.Failed = s.ready.Load(), s.failed.Load()
	if e, ok := s.firstErr.Load().(string); ok {
		r.FirstErr = e
	}
	if r.Loaded, err = sampleMemory(pid, g.Admin); err != nil {
		return r, how, err
	}
	if heapProfile {
		file, top, err := saveHeapProfile(ctx, g.Admin, o.out)
		if err != nil {
			return r, how, err
		}
		fmt.Printf("\n### gateway heap in use with %d streams in flight (%s)\n%s\n", n, file, top)
		r.HeapProfile = file
	}
	return r, how, nil
}

// saveHeapProfile saves the in-use heap after a GC and its top by in-use space.
func saveHeapProfile(ctx context.Context, admin, dir string) (file, top string, err error) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, "memory-gateway-heap-"+time.Now().UTC().Format("20060102T150405Z")+".pprof")
	f, err := os.Create(file)
	if err != nil {
		return "", "", err
	}
	_, err = io.Copy(f, resp.Body)
	f.Close()
	if err != nil {
		return "", "", err
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-nodecount=30", file).Output()
	if err != nil {
		return file, "", fmt.Errorf("go tool pprof: %w", err)
	}
	return file, string(out), os.WriteFile(strings.TrimSuffix(file, ".pprof")+"-top.txt", out, 0o644)
}

// startProfiledGateway starts a gateway that serves /debug/pprof: tollgate
// serve itself once its admin listener does, else `profiledserve`.
func startProfiledGateway(ctx context.Context, c *cluster) (gateway, string, error) {
	g, err := c.startGateway(ctx, 1, true, nil)
	if err != nil {
		return g, "", err
	}
	if servesPprof(g.Admin) {
		return g, "tollgate serve's admin listener", nil
	}
	c.stopProc(g.Cmd)
	self, err := os.Executable()
	if err != nil {
		return g, "", err
	}
	port, err := freePort()
	if err != nil {
		return g, "", err
	}
	g, err = c.startGatewayWith(ctx, self, []string{"profiledserve", "-pprof", "127.0.0.1:" + port}, 1, true, nil)
	g.Admin = "127.0.0.1:" + port
	return g, "`go run ./loadtest profiledserve` (tollgate serve's code with net/http/pprof beside it; the gateway has no /debug/pprof yet)", err
}

// startBare starts the bare ReverseProxy with pprof on a side port.
func startBare(ctx context.Context, c *cluster) (gateway, string, error) {
	self, err := os.Executable()
	if err != nil {
		return gateway{}, "", err
	}
	port, err := freePort()
	if err != nil {
		return gateway{}, "", err
	}
	pprofPort, err := freePort()
	if err != nil {
		return gateway{}, "", err
	}
	g := gateway{Base: "http://127.0.0.1:" + port, Admin: "127.0.0.1:" + pprofPort}
	g.Cmd, err = c.start(ctx, self, []string{"bareproxy", "-addr", "127.0.0.1:" + port, "-upstream", c.mockURL,
		"-strip", "/anthropic", "-api-key", c.credential, "-pprof", g.Admin}, nil, g.Base+"/anthropic/v1/models")
	return g, "bareproxy -pprof", err
}

// sampleMemory reads RSS and, after a forced GC, the heap and stacks in use
// and the goroutine count from /debug/pprof.
func sampleMemory(pid int, admin string) (memSample, error) {
	var s memSample
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + admin + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			s.HeapInuse, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "# Stack = "); ok { // "inuse / sys"
			inuse, _, _ := strings.Cut(v, " ")
			s.StackInuse, _ = strconv.ParseInt(inuse, 10, 64)
		}
	}
	if s.HeapInuse == 0 {
		return s, fmt.Errorf("no HeapInuse in %s/debug/pprof/heap", admin)
	}
	resp2, err := client.Get("http://" + admin + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return s, err
	}
	defer resp2.Body.Close()
	first, _ := bufio.NewReader(resp2.Body).ReadString('\n')
	if v, ok := strings.CutPrefix(strings.TrimSpace(first), "goroutine profile: total "); ok {
		s.Goroutines, _ = strconv.ParseInt(v, 10, 64)
	}
	s.RSS = procRSS(pid)
	return s, nil
}

// slow is a set of requests held open against the gateway.
type slow struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	client   *http.Client
	ready    atomic.Int64
	failed   atomic.Int64
	firstErr atomic.Value
}

// openSlow starts n requests that each stay in flight for streamHold: streamed
// ones count as ready once their first event arrives, non-streamed ones once the
// request is written (the mock then holds its answer). At most 50 connect at a
// time, so the listeners' accept queues never overflow.
func openSlow(base, key string, streamed bool, n int) *slow {
	ctx, cancel := context.WithCancel(context.Background())
	s := &slow{cancel: cancel, client: &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: n,
		DisableCompression:  true,
	}}}
	tokens := int(streamHold / time.Second)
	body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, tokens, streamed)
	sem := make(chan struct{}, 50)
	recordFailure := func(err error) {
		s.failed.Add(1)
		s.firstErr.CompareAndSwap(nil, err.Error())
	}
	for range n {
		s.wg.Go(func() {
			sem <- struct{}{}
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			// A non-streamed request counts as in flight once written, until its
			// answer shows it was refused; its slot is kept 100 ms so arrivals stay
			// near 500/s instead of one burst the admission call would time out on.
			var wrote atomic.Bool
			trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
				if !streamed && info.Err == nil {
					wrote.Store(true)
					s.ready.Add(1)
					time.AfterFunc(100*time.Millisecond, release)
				}
			}}
			fail := func(err error) {
				if wrote.Load() {
					s.ready.Add(-1)
				}
				recordFailure(err)
			}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost,
				base+"/anthropic/v1/messages", strings.NewReader(body))
			req.Header.Set("X-Api-Key", key)
			req.Header.Set("Anthropic-Version", "2023-06-01")
			req.Header.Set("Content-Type", "application/json")
			if streamed {
				req.Header.Set("X-Mock-Event-Interval-Ms", "1000")
				req.Header.Set("X-Mock-Output-Tokens", strconv.Itoa(tokens))
			} else {
				req.Header.Set("X-Mock-Latency-Ms", strconv.FormatInt(streamHold.Milliseconds(), 10))
			}
			resp, err := s.client.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				fail(fmt.Errorf("%d %s", resp.StatusCode, b))
				return
			}
			if streamed {
				buf := make([]byte, 512)
				if _, err := resp.Body.Read(buf); err != nil {
					fail(err)
					return
				}
				s.ready.Add(1)
				release()
			}
			io.Copy(io.Discard, resp.Body)
		})
	}
	return s
}

// close cuts every request and waits for them to end.
func (s *slow) close() {
	s.cancel()
	s.wg.Wait()
	s.client.CloseIdleConnections()
}
