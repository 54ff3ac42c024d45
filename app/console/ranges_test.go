package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestOutOfRangeFormsRefused: every console form with a number out of range
// (wrapping when converted, past its bound, meaningless) or a value that is
// not UTF-8 comes back 422 with a message naming the field, and nothing is
// stored: the limits, tiers, tokens and routes read back as before, and no
// audit row is written.
func TestOutOfRangeFormsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, o := e.owner("acme", "owner@acme.test")
	_, ada := e.invite(owner, "ada@acme.test")
	ctx := t.Context()
	if _, err := e.st.CreateTier(ctx, store.ActorCLI, o.TeamID, store.NewTier("core")); err != nil {
		t.Fatal(err)
	}
	budget := int64(5_000_000)
	if _, err := e.st.SetMemberLimits(ctx, store.ActorCLI, o.TeamID, o.ID, store.Limits{RatePeriod: store.NoLimits().RatePeriod, Budget: &budget}); err != nil {
		t.Fatal(err)
	}
	rt, err := e.st.AddRoute(ctx, store.ActorCLI, store.RouteSpec{TeamID: o.TeamID, Preset: "anthropic", UpstreamURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	memberLimits := "/console/members/" + strconv.FormatInt(ada.ID, 10) + "/limits"

	// An address that is not UTF-8 is refused as a form value is, not
	// handed to Postgres.
	for _, path := range []string{"/console/tiers/co%FFre", "/console/prices/edit?model=cl%FF"} {
		if r := owner.get(path); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.text("error"), "not valid UTF-8") {
			t.Errorf("GET %s: %d %q; want 422 saying it is not UTF-8", path, r.status, r.text("error"))
		}
	}

	// state is everything the forms below could change.
	state := func() string {
		team, err := e.st.TeamLimits(ctx, o.TeamID)
		if err != nil {
			t.Fatal(err)
		}
		own, _ := e.st.MemberLimits(ctx, o.TeamID, ada.ID)
		tiers, _ := e.st.Tiers(ctx, o.TeamID)
		tokens, _ := e.st.AdminTokens(ctx, &o.TeamID)
		routes, _ := e.st.Routes(ctx, o.TeamID)
		reqs, _ := e.st.PendingBudgetRequests(ctx, o.TeamID)
		keys, _ := e.st.Keys(ctx, o.TeamID)
		return fmt.Sprintf("%+v %+v %+v %d %+v %d %d", team, own, tiers, len(tokens), routes, len(reqs), len(keys))
	}
	// 213504 days is 2^64 ns plus 25 minutes: multiplied unchecked, a token
	// of 584 years wrapped into one of 25 minutes.
	const wrappingDays = "213504"

	for _, tt := range []struct {
		name, path string
		form       url.Values
		says       string // in the message, naming the field
	}{
		{"MemberPeriodPast366Days", memberLimits, limitsForm("confirm", "yes", "period", "9000h"), "rate period"},
		{"MemberPeriodPast366DaysWithRate", memberLimits, limitsForm("confirm", "yes", "rate", "10", "period", "9000h"), "rate period"},
		{"MemberPeriodFraction", memberLimits, limitsForm("confirm", "yes", "rate", "10", "period", "1.5ms"), "rate period"},
		{"MemberRatePastInt64", memberLimits, limitsForm("confirm", "yes", "rate", "9223372036854775808"), "Requests"},
		{"MemberConcurrencyPast2^53", memberLimits, limitsForm("confirm", "yes", "concurrency", "9007199254740993"), "concurrency"},
		{"MemberTPMPastBound", memberLimits, limitsForm("confirm", "yes", "tpm", "9223372036854775807"), "tokens per minute"},
		{"MemberBudgetPast2^51", memberLimits, limitsForm("confirm", "yes", "budget", "999999999999"), "budget"},
		{"TeamPeriodPast366Days", "/console/team/limits", limitsForm("confirm", "yes", "period", "9000h"), "rate period"},
		{"TeamBurstPast2^53", "/console/team/limits", limitsForm("confirm", "yes", "rate", "10", "burst", "9007199254740"), "burst"},
		{"TierPeriodPast366Days", "/console/tiers/core", tierForm("period", "9000h"), "rate period"},
		{"TierWeightZero", "/console/tiers/core", tierForm("weight", "0"), "weight"},
		{"TierAutoApprovePastBound", "/console/tiers/core", tierForm("auto_approve", "100000.000001"), "auto-approve"},
		{"TokenDaysWrap", "/console/team/tokens", url.Values{"name": {"ci"}, "role": {"read"}, "expires_days": {wrappingDays}}, "expire"},
		{"TokenDaysPastYear", "/console/team/tokens", url.Values{"name": {"ci"}, "role": {"read"}, "expires_days": {"367"}}, "expire"},
		{"TokenDaysZero", "/console/team/tokens", url.Values{"name": {"ci"}, "role": {"read"}, "expires_days": {"0"}}, "expire"},
		{"AttemptsPastInt64", "/console/routes/" + strconv.FormatInt(rt.ID, 10) + "/resilience", url.Values{"attempts": {"9223372036854775809"}, "health_path": {""}}, "Attempts"},
		{"AttemptsZero", "/console/routes/" + strconv.FormatInt(rt.ID, 10) + "/resilience", url.Values{"attempts": {"0"}, "health_path": {""}}, "attempts"},
		{"BudgetRequestPastBound", "/console/budget-requests", url.Values{"amount": {"100000.01"}, "reason": {"eval"}}, "amount"},
		{"BudgetRequestZero", "/console/budget-requests", url.Values{"amount": {"0"}, "reason": {"eval"}}, "amount"},
		{"KeyNameNotUTF8", "/console/keys", url.Values{"name": {"lap\xfftop"}}, "name"},
		{"ReasonNotUTF8", "/console/budget-requests", url.Values{"amount": {"1"}, "reason": {"more \xc0"}}, "reason"},
		{"TierNameNotUTF8", "/console/tiers", url.Values{"name": {"bo\xfft"}}, "name"},
		{"LimitNotUTF8", memberLimits, limitsForm("confirm", "yes", "budget_period", "dai\xffly"), "budget_period"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, audited := state(), e.auditCount()
			for _, htmx := range []bool{false, true} {
				r := owner.post(tt.path, tt.form)
				if htmx {
					r = owner.htmx(tt.path, tt.form)
				}
				// A form's message, an error page's, or HTMX's one line of text.
				msg := r.doc.Find(`[role="alert"], [data-testid="error"]`).Text()
				if msg == "" {
					msg = r.body
				}
				if r.status != http.StatusUnprocessableEntity || !strings.Contains(strings.ToLower(msg), strings.ToLower(tt.says)) {
					t.Errorf("htmx %v: %d %q; want 422 with a message naming %q", htmx, r.status, msg, tt.says)
				}
			}
			if after := state(); after != before {
				t.Errorf("refused, yet stored:\nbefore %s\nafter  %s", before, after)
			}
			if n := e.auditCount(); n != audited {
				t.Errorf("refused, yet %d audit rows were written", n-audited)
			}
		})
	}
}

// tierForm is the tier edit form with weight 1, no auto-approval and no limits, then kv.
func tierForm(kv ...string) url.Values {
	f := limitsForm("weight", "1", "auto_approve", "")
	for i := 0; i < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}
