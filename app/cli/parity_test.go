package cli_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestSetLimitsKeepsWhatItIsNotTold: set-limits changes the limits its flags
// name and keeps the rest, under the admin API's names (--rate-limit,
// --budget-usd, ...) as under the older short flags; 0 or none removes one.
func TestSetLimitsKeepsWhatItIsNotTold(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	member := []string{"--team", "acme", "--member", "ada@acme.test"}
	set := func(flags ...string) store.Limits {
		t.Helper()
		var l store.Limits
		c.json(&l, append(append([]string{"admin", "set-limits"}, member...), flags...)...)
		return l
	}
	l := set("--rate", "10", "--period", "1s", "--concurrency", "3", "--tpm", "1000", "--budget", "5")
	budget := int64(5_000_000)
	want := store.Limits{RateAlgorithm: "token_bucket", RateLimit: 10, RatePeriod: time.Second, Concurrency: 3, TokensPerMinute: 1000,
		Budget: &budget, BudgetPeriod: "monthly"}
	check := func(what string, got store.Limits) {
		t.Helper()
		if got.RateAlgorithm != want.RateAlgorithm || got.RateLimit != want.RateLimit || got.RatePeriod != want.RatePeriod ||
			got.RateBurst != want.RateBurst || got.Concurrency != want.Concurrency || got.TokensPerMinute != want.TokensPerMinute ||
			(got.Budget == nil) != (want.Budget == nil) || got.Budget != nil && *got.Budget != *want.Budget || got.BudgetPeriod != want.BudgetPeriod {
			t.Errorf("%s: limits %+v, want %+v", what, got, want)
		}
	}
	check("first set", l)
	for _, step := range []struct {
		flags  []string
		change func()
	}{
		{[]string{"--rate-limit", "20"}, func() { want.RateLimit = 20 }},
		{[]string{"--rate", "30"}, func() { want.RateLimit = 30 }},
		{[]string{"--rate-period", "1m"}, func() { want.RatePeriod = time.Minute }},
		{[]string{"--rate-burst", "40"}, func() { want.RateBurst = 40 }},
		{[]string{"--tokens-per-minute", "0"}, func() { want.TokensPerMinute = 0 }},
		{[]string{"--budget-usd", "2.50"}, func() { b := int64(2_500_000); want.Budget = &b }},
		{[]string{"--rate-algorithm", "sliding_window", "--rate-burst", "0"}, func() { want.RateAlgorithm, want.RateBurst = "sliding_window", 0 }},
		{[]string{"--concurrency", "0"}, func() { want.Concurrency = 0 }},
		{[]string{"--budget-usd", "none"}, func() { want.Budget = nil }},
		{[]string{"--budget-period", "daily"}, func() { want.BudgetPeriod = "daily" }},
	} {
		step.change()
		check(strings.Join(step.flags, " "), set(step.flags...))
	}
	// What the member's own limits leave out, the team's default tier fills in.
	if out := c.ok("admin", "list", "members", "--team", "acme"); !strings.Contains(out, "30 per 1m0s (sliding_window)") ||
		!strings.Contains(out, "budget $20.00 monthly") || !strings.Contains(out, "at most 4 in flight") {
		t.Errorf("list members after set-limits:\n%s", out)
	}
	if _, err := c.run(append(append([]string{"admin", "set-limits"}, member...), "--budget-usd", "5 dollars")...); err == nil ||
		!strings.Contains(err.Error(), "not a dollar amount") {
		t.Errorf("--budget-usd '5 dollars': %v, want it refused", err)
	}
}

// TestMemberAndRouteParity: add-member prints an invite link and lists the
// member as invited until they use it; remove-member revokes their keys and
// keeps them listed as removed, but not the team's last active owner;
// delete-route takes a route away, and a second delete says there is none.
func TestMemberAndRouteParity(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	out := c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	wantOutput(t, "add-member", out, "added ada@acme.test to acme as member (id ", "invited", "/console/invite/")
	var added struct {
		store.Member
		InviteLink string `json:"invite_link"`
	}
	c.json(&added, "admin", "add-member", "--team", "acme", "--email", "olga@acme.test", "--role", "owner")
	if !added.Invited || !strings.Contains(added.InviteLink, "/console/invite/") {
		t.Errorf("add-member --json = %+v, want invited with a link", added)
	}
	if out := c.ok("admin", "list", "members", "--team", "acme"); !regexp.MustCompile(`ada@acme.test\s+member\s+invited`).MatchString(out) {
		t.Errorf("list members:\n%s\nwant ada listed as invited", out)
	}

	key := c.issue("--team", "acme", "--member", "ada@acme.test")
	wantOutput(t, "remove-member", c.ok("admin", "remove-member", "--team", "acme", "--member", "ada@acme.test"),
		"removed ada@acme.test from acme: their keys are revoked")
	var keys []store.Key
	c.json(&keys, "admin", "list", "keys", "--team", "acme")
	if len(keys) != 1 || keys[0].ID != keyID(key) || keys[0].RevokedAt == nil {
		t.Errorf("keys after remove-member: %+v, want %s revoked", keys, keyID(key))
	}
	if out := c.ok("admin", "list", "members", "--team", "acme"); !regexp.MustCompile(`ada@acme.test\s+member\s+removed`).MatchString(out) {
		t.Errorf("list members after removal:\n%s\nwant ada listed as removed", out)
	}
	if _, err := c.run("admin", "remove-member", "--team", "acme", "--member", "ada@acme.test"); err == nil || !strings.Contains(err.Error(), "already removed") {
		t.Errorf("removing twice: %v", err)
	}
	if _, err := c.run("admin", "enable-member", "--team", "acme", "--member", "ada@acme.test"); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("enabling a removed member: %v", err)
	}
	if _, err := c.run("admin", "remove-member", "--team", "acme", "--member", "olga@acme.test"); err == nil || !strings.Contains(err.Error(), "last active owner") {
		t.Errorf("removing the last owner: %v", err)
	}

	c.ok("admin", "add-route", "--team", "acme", "--preset", "anthropic")
	wantOutput(t, "delete-route", c.ok("admin", "delete-route", "--team", "acme", "--prefix", "/anthropic"), "deleted route /anthropic of acme")
	var routes []store.Route
	if c.json(&routes, "admin", "list", "routes", "--team", "acme"); len(routes) != 0 {
		t.Errorf("routes after delete-route: %+v", routes)
	}
	if _, err := c.run("admin", "delete-route", "--team", "acme", "--prefix", "/anthropic"); err == nil || !strings.Contains(err.Error(), "has no route /anthropic") {
		t.Errorf("deleting twice: %v", err)
	}
	if _, err := c.run("admin", "delete-route", "--team", "acme"); err == nil || !strings.Contains(err.Error(), "--prefix is required") {
		t.Errorf("delete-route without --prefix: %v", err)
	}
}
