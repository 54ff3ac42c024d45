package clustertest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/clustertest"
)

// TestCluster runs admission against a real 3-node Redis Cluster through
// go-redis's ClusterClient: every team's keys share one hash tag, so each
// script touches one slot (no CROSSSLOT), and teams spread over the nodes.
// Several limiters on separate clients stand in for gateway replicas.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCluster(t, 3)
	teams := teamsOnEveryNode(t, c)

	t.Run("RevocationAndCutOffBindOnEveryReplica", func(t *testing.T) {
		t.Parallel()
		prefix := randomPrefix()
		a, b := newLimiter(t, c, prefix), newLimiter(t, c, prefix)
		ctx := context.Background()
		for _, team := range teams {
			req := limiter.Request{Team: team, Member: "ada", KeyID: "k1"}
			admit(t, b, req, "")
			must(t, a.SetKeyRevoked(ctx, team, "k1", true))
			admit(t, b, req, limiter.ReasonRevoked)
			other := req
			other.KeyID = "k2"
			admit(t, b, other, "")
			must(t, a.SetKeyRevoked(ctx, team, "k1", false))
			admit(t, b, req, "")

			must(t, a.SetMemberCutOff(ctx, team, "ada", true))
			admit(t, b, req, limiter.ReasonCutOff)
			admit(t, b, other, limiter.ReasonCutOff)
			colleague := req
			colleague.Member = "bob"
			admit(t, b, colleague, "")
			must(t, a.SetMemberCutOff(ctx, team, "ada", false))
			admit(t, b, req, "")
		}
	})

	t.Run("RateLimitsAreExactUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		prefix := randomPrefix()
		replicas := []limiter.Limiter{newLimiter(t, c, prefix), newLimiter(t, c, prefix), newLimiter(t, c, prefix)}
		// Periods of an hour: no refill or window slide during the test.
		window := limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmSlidingWindow, Limit: 25, Period: time.Hour}}
		bucket := limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmTokenBucket, Limit: 25, Period: time.Hour}}
		teamWindow := limiter.Policy{Rate: &limiter.Rate{Algorithm: limiter.AlgorithmSlidingWindow, Limit: 40, Period: time.Hour}}
		type load struct {
			name         string
			members      []string
			member, team limiter.Policy
			want         int64
		}
		loads := []load{
			{"MemberSlidingWindow", []string{"w"}, window, limiter.Policy{}, 25},
			{"MemberTokenBucket", []string{"b"}, bucket, limiter.Policy{}, 25},
			{"TeamSlidingWindowOverThreeMembers", []string{"x", "y", "z"}, limiter.Policy{}, teamWindow, 40},
		}
		var wg sync.WaitGroup
		for _, team := range teams {
			for _, l := range loads {
				// Each team gets its own copy of the team-limited load, under its own name.
				team := team
				if len(l.members) > 1 {
					team += "-" + strings.ToLower(l.name[:4])
				}
				wg.Go(func() {
					got := hammer(t, replicas, team, l.members, l.member, l.team, 240)
					if got != l.want {
						t.Errorf("%s on team %s: %d admitted of 240, want exactly %d", l.name, team, got, l.want)
					}
				})
			}
		}
		wg.Wait()
		checkKeysOnTheirNodes(t, c, prefix)
	})

	t.Run("ConcurrencyCapsHoldAndSlotsReturn", func(t *testing.T) {
		t.Parallel()
		prefix := randomPrefix()
		replicas := []limiter.Limiter{newLimiter(t, c, prefix), newLimiter(t, c, prefix)}
		for _, team := range teams {
			member := limiter.Policy{Concurrency: 3}
			req := limiter.Request{Team: team, Member: "ada", KeyID: "k", MemberPolicy: member, Lease: time.Minute}
			held, refused := admitTogether(t, replicas, 10, func(int) limiter.Request { return req })
			if len(held) != 3 || refused[limiter.ReasonConcurrency] != 7 {
				t.Fatalf("team %s: %d of 10 simultaneous requests admitted, refusals %v; want 3 and 7 for concurrency", team, len(held), refused)
			}
			admit(t, replicas[0], req, limiter.ReasonConcurrency)
			settle(t, replicas[1], held[0], 0, true)
			settle(t, replicas[1], held[0], 0, false) // a replay frees nothing more
			admit(t, replicas[0], req, "")
			admit(t, replicas[1], req, limiter.ReasonConcurrency)

			// The team cap binds across members: 3 members × 3 slots, team cap 5.
			members := []string{"x", "y", "z"}
			teamReq := limiter.Request{Team: team + "-conc", KeyID: "k", MemberPolicy: member,
				TeamPolicy: limiter.Policy{Concurrency: 5}, Lease: time.Minute}
			held, _ = admitTogether(t, replicas, 9, func(i int) limiter.Request {
				r := teamReq
				r.Member = members[i%3]
				return r
			})
			if len(held) != 5 {
				t.Errorf("team %s: %d of 9 simultaneous requests over 3 members admitted, want the team cap 5", teamReq.Team, len(held))
			}
		}
	})

	t.Run("BudgetsAndTPMAreExactAndSettleOnce", func(t *testing.T) {
		t.Parallel()
		prefix := randomPrefix()
		replicas := []limiter.Limiter{newLimiter(t, c, prefix), newLimiter(t, c, prefix), newLimiter(t, c, prefix)}
		ctx := context.Background()
		for _, team := range teams {
			// 1000 µ$ for the member, each request holding 100: exactly 10 fit.
			req := limiter.Request{Team: team, Member: "ada", KeyID: "k", Hold: 100, Lease: time.Minute,
				MemberPolicy: limiter.Policy{Budget: &limiter.Budget{Limit: 1000, Period: limiter.PeriodTotal}}}
			// A team Redis has never seen has no spend counters: the gateway rebuilds
			// them from its ledger (here: nothing spent) and admits again.
			admit(t, replicas[0], req, limiter.ReasonRebuild)
			must(t, replicas[1].Rebuild(ctx, team, limiter.TeamState{At: time.Now(),
				Members: map[string]map[limiter.Period]int64{"ada": {limiter.PeriodTotal: 0}}}))

			held, refused := admitTogether(t, replicas, 30, func(int) limiter.Request { return req })
			if len(held) != 10 || refused[limiter.ReasonBudget] != 20 {
				t.Fatalf("team %s: %d of 30 admitted under a budget of 10 holds, refusals %v", team, len(held), refused)
			}
			// Five responses cost half their estimate: 5×50 spent + 5×100 still held
			// leaves 250, room for exactly 2 more holds.
			for _, h := range held[:5] {
				settle(t, replicas[2], h, 50, true)
				settle(t, replicas[0], h, 50, false) // a replayed settle charges nothing
			}
			more, _ := admitTogether(t, replicas, 10, func(int) limiter.Request { return req })
			if len(more) != 2 {
				t.Errorf("team %s: %d admitted after settling, want 2", team, len(more))
			}

			// TPM on the team: 1000 tokens a minute, 100 per request, over 3 members.
			members := []string{"x", "y", "z"}
			tpm := limiter.Request{Team: team + "-tpm", KeyID: "k", Tokens: 100, Lease: time.Minute,
				TeamPolicy: limiter.Policy{TokensPerMinute: 1000}}
			first := tpm
			first.Member = "x"
			admit(t, replicas[0], first, limiter.ReasonRebuild)
			must(t, replicas[0].Rebuild(ctx, tpm.Team, limiter.TeamState{At: time.Now()}))
			held, refused = admitTogether(t, replicas, 30, func(i int) limiter.Request {
				r := tpm
				r.Member = members[i%3]
				return r
			})
			// A refill of 1000/min gives back one request's tokens every 6s; the burst
			// takes well under that.
			if len(held) != 10 || refused[limiter.ReasonTPM] != 20 {
				t.Errorf("team %s: %d of 30 admitted under 1000 TPM at 100 tokens each, refusals %v", tpm.Team, len(held), refused)
			}
		}
	})
}

// teamsOnEveryNode picks team names whose hash tags land on three different
// nodes, so the suite exercises every node and the client's slot routing.
func teamsOnEveryNode(t *testing.T, c *clustertest.Cluster) []string {
	t.Helper()
	ctx := context.Background()
	byNode := make([]string, len(c.Addrs))
	found := 0
	for i := 0; found < len(byNode) && i < 1000; i++ {
		team := fmt.Sprintf("team%d", i)
		node, err := c.NodeOf(ctx, "{t:"+team+"}")
		must(t, err)
		if byNode[node] == "" {
			byNode[node] = team
			found++
		}
	}
	if found != len(byNode) {
		t.Fatalf("no team name found for every node: %q", byNode)
	}
	return byNode
}

// newLimiter is one replica's limiter on its own ClusterClient.
func newLimiter(t *testing.T, c *clustertest.Cluster, prefix string) limiter.Limiter {
	// A loaded 2-core machine: a generous timeout keeps the test about exactness,
	// not latency; a timeout would show up as an error, failing the test.
	return limiter.NewRedis(c.Client(t), limiter.RedisOptions{Prefix: prefix, Timeout: 5 * time.Second})
}

var requestSeq atomic.Int64

func requestID() string { return fmt.Sprintf("req-%d", requestSeq.Add(1)) }

// admit asks for admission and checks the verdict: want "" means allowed.
func admit(t *testing.T, l limiter.Limiter, req limiter.Request, want limiter.Reason) {
	t.Helper()
	req.RequestID = requestID()
	d, err := l.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit %s/%s/%s: %v", req.Team, req.Member, req.KeyID, err)
	}
	if d.Allowed != (want == "") || d.Reason != want {
		t.Fatalf("Admit %s/%s/%s = allowed %v reason %q, want reason %q", req.Team, req.Member, req.KeyID, d.Allowed, d.Reason, want)
	}
}

// hammer sends n requests for team from 4 goroutines per replica, members in
// turn, and returns how many were admitted.
func hammer(t *testing.T, replicas []limiter.Limiter, team string, members []string, member, teamPolicy limiter.Policy, n int) int64 {
	var admitted, sent atomic.Int64
	var wg sync.WaitGroup
	for _, l := range replicas {
		for range 4 {
			wg.Go(func() {
				for {
					i := sent.Add(1)
					if i > int64(n) {
						return
					}
					req := limiter.Request{Team: team, Member: members[int(i)%len(members)], KeyID: "k", RequestID: requestID(),
						MemberPolicy: member, TeamPolicy: teamPolicy}
					d, err := l.Admit(context.Background(), req)
					if err != nil {
						t.Errorf("Admit %s/%s: %v", req.Team, req.Member, err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					} else if d.Reason != limiter.ReasonRate {
						t.Errorf("Admit %s/%s refused for %q, want only rate refusals", req.Team, req.Member, d.Reason)
					}
				}
			})
		}
	}
	wg.Wait()
	return admitted.Load()
}

// admitted is a request that holds whatever Admit reserved for it.
type admitted struct {
	req   limiter.Request
	epoch int64
}

// admitTogether sends n requests at once, request i made by mk(i), spread over
// replicas, and returns those admitted (none settled) and the refusals by reason.
func admitTogether(t *testing.T, replicas []limiter.Limiter, n int, mk func(i int) limiter.Request) ([]admitted, map[limiter.Reason]int) {
	t.Helper()
	var mu sync.Mutex
	var held []admitted
	refused := map[limiter.Reason]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		req := mk(i)
		req.RequestID = requestID()
		wg.Go(func() {
			<-start
			d, err := replicas[i%len(replicas)].Admit(context.Background(), req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("Admit %s/%s: %v", req.Team, req.Member, err)
			case d.Allowed:
				held = append(held, admitted{req, d.Epoch})
			default:
				refused[d.Reason]++
			}
		})
	}
	close(start)
	wg.Wait()
	return held, refused
}

// settle reports a's real cost; applied says whether it must change anything
// (false for a replay, which no longer finds the hold).
func settle(t *testing.T, l limiter.Limiter, a admitted, cost int64, applied bool) {
	t.Helper()
	res, err := l.Settle(context.Background(), limiter.Settlement{Team: a.req.Team, Member: a.req.Member,
		RequestID: a.req.RequestID, Cost: cost, Epoch: a.epoch})
	if err != nil {
		t.Fatalf("Settle %s/%s %s: %v", a.req.Team, a.req.Member, a.req.RequestID, err)
	}
	if a.req.Hold > 0 && (res.Applied != applied || res.Known != applied) {
		t.Errorf("Settle %s/%s %s = %+v, want applied and known %v", a.req.Team, a.req.Member, a.req.RequestID, res, applied)
	}
}

// checkKeysOnTheirNodes reads every node's keys under prefix: each must belong
// to a team whose slot that node owns, and every node must hold some.
func checkKeysOnTheirNodes(t *testing.T, c *clustertest.Cluster, prefix string) {
	t.Helper()
	ctx := context.Background()
	for i, addr := range c.Addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		keys, err := node.Keys(ctx, prefix+"*").Result()
		node.Close()
		must(t, err)
		if len(keys) == 0 {
			t.Errorf("node %d (%s) holds no key under %s: teams did not spread over the nodes", i, addr, prefix)
		}
		for _, k := range keys {
			tag := k[strings.Index(k, "{") : strings.Index(k, "}")+1]
			if owner, err := c.NodeOf(ctx, tag); err != nil || owner != i {
				t.Errorf("key %s is on node %d, its slot belongs to node %d (%v)", k, i, owner, err)
			}
		}
	}
}

func randomPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "ct:" + hex.EncodeToString(b) + ":"
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
