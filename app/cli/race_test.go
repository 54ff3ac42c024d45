package cli_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// concurrently runs every command line at once and returns their outputs and errors.
func (c *tool) concurrently(lines [][]string) ([]string, []error) {
	outs, errs := make([]string, len(lines)), make([]error, len(lines))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, args := range lines {
		done.Go(func() {
			start.Wait()
			outs[i], errs[i] = c.run(args...)
		})
	}
	start.Done()
	done.Wait()
	return outs, errs
}

func TestConcurrentRotateKeyHasOneWinner(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	id := keyID(c.issue("--team", "acme", "--member", "ada@acme.test"))
	lines := make([][]string, 6)
	for i := range lines {
		lines[i] = []string{"admin", "rotate-key", "--key", id}
	}
	outs, errs := c.concurrently(lines)
	var won []string
	for i, err := range errs {
		if err == nil {
			won = append(won, outs[i])
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d rotations of %s succeeded, want exactly one: %q", len(won), id, won)
	}
	winner := keyID(plaintextKey.FindString(won[0]))
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "key "+id+" was already rotated to "+winner) {
			t.Errorf("losing rotation: %v, want \"already rotated to %s\"", err, winner)
		}
	}
}

// Each set-limits names one flag; run at once, every flag must land: the store
// applies each to the limits as stored, under a lock, not as read before.
func TestConcurrentSetLimitsLoseNothing(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	flags := [][]string{{"--rate", "10"}, {"--period", "2s"}, {"--concurrency", "3"}, {"--tpm", "1000"},
		{"--budget", "5.00"}, {"--budget-period", "daily"}}
	for _, who := range [][]string{{"--member", "ada@acme.test"}, nil} {
		var lines [][]string
		for _, f := range flags {
			lines = append(lines, append(append([]string{"admin", "set-limits", "--team", "acme"}, who...), f...))
		}
		if _, errs := c.concurrently(lines); errs != nil {
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		var got store.Limits
		c.json(&got, append([]string{"admin", "set-limits", "--team", "acme"}, who...)...)
		if got.RateLimit != 10 || got.RatePeriod.String() != "2s" || got.Concurrency != 3 || got.TokensPerMinute != 1000 ||
			got.Budget == nil || *got.Budget != 5_000_000 || got.BudgetPeriod != "daily" {
			t.Errorf("limits %v after concurrent set-limits = %+v, want every flag's change", who, got)
		}
	}
}

// TestSetTeamOverBudget: set-limits --over-budget sets the team's choice for
// members in no tier; it is refused for a member and for a value not offered.
func TestSetTeamOverBudget(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	c.ok("admin", "set-limits", "--team", "acme", "--over-budget", "fit")
	var teams []store.Team
	c.json(&teams, "admin", "list", "teams")
	if len(teams) != 1 || teams[0].OverBudget != store.OverBudgetFit {
		t.Fatalf("teams %+v, want acme's over_budget fit", teams)
	}
	for _, args := range [][]string{{"--member", "ada@acme.test", "--over-budget", "fit"}, {"--over-budget", "lower"}} {
		if _, err := c.run(append([]string{"admin", "set-limits", "--team", "acme"}, args...)...); err == nil {
			t.Errorf("set-limits %v: accepted", args)
		}
	}
}
