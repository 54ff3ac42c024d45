package cli_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

func TestTierAndBudgetCommands(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	out := c.ok("admin", "tier", "create", "--team", "acme", "--name", "intern", "--rate", "10", "--period", "1m",
		"--budget", "5.00", "--weight", "2", "--auto-approve", "1.50")
	if !strings.Contains(out, "tier intern: 10 per 1m0s") || !strings.Contains(out, "weight 2") || !strings.Contains(out, "$1.50") {
		t.Fatalf("tier create printed %q", out)
	}
	// set changes the flags given only.
	var tr store.Tier
	c.json(&tr, "admin", "tier", "set", "--team", "acme", "--name", "intern", "--concurrency", "3")
	if tr.Limits.RateLimit != 10 || tr.Limits.Concurrency != 3 || tr.Weight != 2 || *tr.Limits.Budget != 5_000_000 || tr.AutoApprove != 1_500_000 {
		t.Fatalf("tier set = %+v", tr)
	}
	// The member's own limit wins over the tier's.
	c.ok("admin", "set-limits", "--team", "acme", "--member", "ada@acme.test", "--concurrency", "9")
	var e store.Effective
	c.json(&e, "admin", "tier", "assign", "--team", "acme", "--member", "ada@acme.test", "--tier", "intern")
	if e.Tier != "intern" || e.Limits.Concurrency != 9 || e.Limits.RateLimit != 10 {
		t.Fatalf("assign = %+v; want the tier's rate and the member's concurrency", e)
	}
	var tiers []store.Tier
	c.json(&tiers, "admin", "tier", "list", "--team", "acme")
	// The team's own default tier, then intern.
	if len(tiers) != 2 || tiers[0].Name != store.DefaultTierName || tiers[1].Name != "intern" || tiers[1].Members != 1 {
		t.Fatalf("tier list = %+v", tiers)
	}
	if _, err := c.run("admin", "tier", "delete", "--team", "acme", "--name", "intern"); err == nil || !strings.Contains(err.Error(), "still has 1 member") {
		t.Fatalf("delete of a tier with a member: %v", err)
	}
	if _, err := c.run("admin", "tier", "assign", "--team", "acme", "--member", "ada@acme.test"); err == nil {
		t.Fatal("assign without --tier or --none succeeded")
	}

	// Within the tier's ceiling: approved at once; beyond: waits for an owner.
	var r store.BudgetRequest
	c.json(&r, "admin", "budget", "request", "--team", "acme", "--member", "ada@acme.test", "--amount", "1.00", "--reason", "eval")
	if r.Status != store.RequestApproved || !r.AutoApproved {
		t.Fatalf("request within the ceiling = %+v", r)
	}
	c.json(&r, "admin", "budget", "request", "--team", "acme", "--member", "ada@acme.test", "--amount", "20", "--reason", "paper")
	if r.Status != store.RequestPending {
		t.Fatalf("request past the ceiling = %+v", r)
	}
	if out := c.ok("admin", "budget", "list", "--team", "acme"); !strings.Contains(out, "ada@acme.test") || !strings.Contains(out, "$20.00") {
		t.Fatalf("budget list printed %q", out)
	}
	id := strconv.FormatInt(r.ID, 10)
	c.json(&r, "admin", "budget", "approve", "--team", "acme", "--id", id, "--note", "go")
	if r.Status != store.RequestApproved || r.Note != "go" {
		t.Fatalf("approve = %+v", r)
	}
	if _, err := c.run("admin", "budget", "decline", "--team", "acme", "--id", id); err == nil || !strings.Contains(err.Error(), "already approved") {
		t.Fatalf("decline after approval: %v", err)
	}
	c.json(&e, "admin", "tier", "assign", "--team", "acme", "--member", "ada@acme.test", "--tier", "intern")
	if e.Granted != 21_000_000 || *e.Budget() != 26_000_000 {
		t.Fatalf("after grants: %+v; want $21 granted on a $5 budget", e)
	}
	if _, err := c.run("admin", "budget", "request", "--team", "acme", "--member", "ada@acme.test", "--amount", "1", "--reason", "\x1b]0;pwned\x07"); err == nil {
		t.Fatal("a reason with terminal escapes was accepted")
	}
	c.ok("admin", "tier", "assign", "--team", "acme", "--member", "ada@acme.test", "--none")
	c.ok("admin", "tier", "delete", "--team", "acme", "--name", "intern")
}
