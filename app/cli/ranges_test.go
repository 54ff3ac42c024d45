package cli_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/store"
)

// TestOutOfRangeArgumentsRefused: a number out of range (past its bound,
// negative, zero where it means nothing, past int64) or an argument that is
// not UTF-8, on every admin verb that writes, fails with one line naming what
// is wrong, prints nothing, and changes nothing: the audit log is as before.
func TestOutOfRangeArgumentsRefused(t *testing.T) {
	t.Parallel()
	c := newTool(t)
	c.vars["CREDENTIAL_GRANTS"] = apptest.LoopbackGrants(nil)
	c.ok("admin", "create-team", "--name", "acme")
	c.ok("admin", "add-member", "--team", "acme", "--email", "ada@acme.test")
	c.ok("admin", "set-limits", "--team", "acme", "--member", "ada@acme.test", "--budget", "5")
	c.ok("admin", "tier", "create", "--team", "acme", "--name", "core")
	c.ok("admin", "add-route", "--team", "acme", "--preset", "anthropic", "--upstream", "http://127.0.0.1:1")
	c.ok("admin", "set-price", "--model", "claude-x", "--input", "3", "--output", "15", "--max-output", "8192")
	member := []string{"--team", "acme", "--member", "ada@acme.test"}
	var before []store.AuditEntry
	c.json(&before, "admin", "audit")

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"TeamPeriodPast366Days", []string{"admin", "set-limits", "--team", "acme", "--period", "9000h"}, "rate period"},
		{"MemberPeriodPast366Days", append([]string{"admin", "set-limits", "--period", "9000h"}, member...), "rate period"},
		{"MemberPeriodFraction", append([]string{"admin", "set-limits", "--rate", "10", "--period", "1500us"}, member...), "rate period"},
		{"MemberPeriodNegative", append([]string{"admin", "set-limits", "--period", "-1s"}, member...), "rate period"},
		{"MemberRatePastInt64", append([]string{"admin", "set-limits", "--rate", "9223372036854775808"}, member...), "-rate: value out of range"},
		{"MemberRateNegative", append([]string{"admin", "set-limits", "--rate", "-1"}, member...), "rate limit"},
		{"MemberBurstPast2^53", append([]string{"admin", "set-limits", "--rate", "10", "--burst", "9007199254740"}, member...), "burst"},
		{"MemberConcurrencyPast2^53", append([]string{"admin", "set-limits", "--concurrency", "9007199254740993"}, member...), "concurrency"},
		{"MemberTPMPastBound", append([]string{"admin", "set-limits", "--tpm", "9223372036854775807"}, member...), "tokens per minute"},
		{"MemberBudgetPast2^51", append([]string{"admin", "set-limits", "--budget", "999999999999"}, member...), "budget"},
		{"TierCreatePeriodPast366Days", []string{"admin", "tier", "create", "--team", "acme", "--name", "bots", "--period", "9000h"}, "rate period"},
		{"TierSetPeriodPast366Days", []string{"admin", "tier", "set", "--team", "acme", "--name", "core", "--period", "9000h"}, "rate period"},
		{"TierWeightZero", []string{"admin", "tier", "set", "--team", "acme", "--name", "core", "--weight", "0"}, "weight"},
		{"TierAutoApprovePastBound", []string{"admin", "tier", "set", "--team", "acme", "--name", "core", "--auto-approve", "100000.01"}, "auto-approve"},
		{"BudgetRequestPastBound", append([]string{"admin", "budget", "request", "--amount", "100000.01", "--reason", "eval"}, member...), "amount"},
		{"BudgetRequestZero", append([]string{"admin", "budget", "request", "--amount", "0", "--reason", "eval"}, member...), "amount"},
		{"BudgetDecideNegativeID", []string{"admin", "budget", "approve", "--team", "acme", "--id", "-1"}, "--id"},
		{"PriceRatePastBound", []string{"admin", "set-price", "--model", "claude-x", "--input", "999999999999"}, "--input"},
		{"PriceMaxOutputPastBound", []string{"admin", "set-price", "--model", "claude-x", "--max-output", "9223372036854775807"}, "--max-output"},
		{"PriceMaxOutputZero", []string{"admin", "set-price", "--model", "claude-x", "--max-output", "0"}, "--max-output"},
		{"PriceTierThresholdNegative", []string{"admin", "set-price", "--model", "claude-x", "--tier-threshold", "-1"}, "--tier-threshold"},
		{"RouteAttemptsPastInt64", []string{"admin", "set-route", "--team", "acme", "--prefix", "/anthropic", "--attempts", "9223372036854775808"}, "-attempts: value out of range"},
		{"RouteAttemptsZero", []string{"admin", "set-route", "--team", "acme", "--prefix", "/anthropic", "--attempts", "0"}, "attempts"},
		{"TokenExpiresPastYear", []string{"admin", "token", "create", "--team", "acme", "--name", "ci", "--expires", "9000h"}, "expire"},
		{"TokenExpiresNegative", []string{"admin", "token", "create", "--team", "acme", "--name", "ci", "--expires", "-1h"}, "expire"},
		{"UsageSinceNegative", []string{"admin", "usage", "--team", "acme", "--since", "-24h"}, "--since"},
		{"ReconcileSinceNegative", []string{"admin", "reconcile", "--team", "acme", "--skip-redis", "--provider-log", "x", "--since", "-1h"}, "--since"},
		{"EmailNotUTF8", []string{"admin", "add-member", "--team", "acme", "--email", "gr\xe9ce@acme.test"}, "UTF-8"},
		{"KeyNameNotUTF8", append([]string{"admin", "issue-key", "--name", "lap\xfftop"}, member...), "UTF-8"},
		{"ReasonNotUTF8", append([]string{"admin", "budget", "request", "--amount", "1", "--reason", "more \xc0"}, member...), "UTF-8"},
		{"TokenNameNotUTF8", []string{"admin", "token", "create", "--team", "acme", "--name", "c\xffi"}, "UTF-8"},
		{"TeamNotUTF8", []string{"admin", "set-limits", "--team", "ac\xffme", "--rate", "1"}, "--team is not valid UTF-8"},
		{"MemberRefNotUTF8", []string{"admin", "set-limits", "--team", "acme", "--member", "ad\xffa@acme.test", "--rate", "1"}, "--member is not valid UTF-8"},
		{"ModelNotUTF8", []string{"admin", "set-price", "--model", "claude-\xff", "--input", "3", "--output", "15", "--max-output", "10"}, "UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.run(tt.args...)
			if err == nil {
				t.Fatalf("tollgate %q succeeded, printing %q", tt.args, out)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q: want one line naming %q", msg, tt.want)
			}
			if out != "" {
				t.Errorf("a refused command printed %q", out)
			}
		})
	}
	var after []store.AuditEntry
	if c.json(&after, "admin", "audit"); len(after) != len(before) {
		t.Errorf("refused commands wrote %d audit rows: %+v", len(after)-len(before), after[:len(after)-len(before)])
	}
}
