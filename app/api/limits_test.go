package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// limitsFixture gives a member every kind of limit, through the store.
func (e *env) limitsFixture(team store.Team, email string) (store.Member, store.Limits) {
	e.t.Helper()
	ctx := context.Background()
	m, err := e.st.AddMember(ctx, store.ActorCLI, team.ID, email, store.RoleMember)
	if err != nil {
		e.t.Fatal(err)
	}
	budget := int64(5_000_000)
	l, err := e.st.SetMemberLimits(ctx, store.ActorCLI, team.ID, m.ID, store.Limits{RateAlgorithm: "token_bucket", RateLimit: 10,
		RatePeriod: time.Second, RateBurst: 20, Concurrency: 3, TokensPerMinute: 1000, Budget: &budget, BudgetPeriod: "monthly"})
	if err != nil {
		e.t.Fatal(err)
	}
	return m, l
}

// limitsAt reads limits back through the API as a generic object.
func (e *env) limitsAt(token, path string) map[string]any {
	e.t.Helper()
	var got map[string]any
	e.call(token, http.MethodGet, path, nil).decode(e.t, &got)
	return got
}

// TestLimitsPatchChangesOnlyWhatItNames: a PATCH of any one field, in either
// unit, changes that field and keeps every other; null removes a limit; a
// value in a unit the API does not take, or two units that disagree, is a 422
// naming the field and changes nothing.
func TestLimitsPatchChangesOnlyWhatItNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)

	for _, tt := range []struct {
		name string
		body string
		want map[string]any // the fields that change, as GET answers them
	}{
		{"RateLimit", `{"rate_limit":7}`, map[string]any{"rate_limit": 7.0}},
		{"RateLimitNull", `{"rate_limit":null}`, map[string]any{"rate_limit": nil}},
		{"RateLimitZero", `{"rate_limit":0}`, map[string]any{"rate_limit": nil}},
		{"RateAlgorithm", `{"rate_algorithm":"sliding_window","rate_burst":null}`, map[string]any{"rate_algorithm": "sliding_window", "rate_burst": nil}},
		{"RatePeriodMS", `{"rate_period_ms":60000}`, map[string]any{"rate_period_ms": 60000.0, "rate_period": "1m0s"}},
		{"RatePeriodDuration", `{"rate_period":"1m"}`, map[string]any{"rate_period_ms": 60000.0, "rate_period": "1m0s"}},
		{"RatePeriodBothUnitsAgree", `{"rate_period":"2s","rate_period_ms":2000}`, map[string]any{"rate_period_ms": 2000.0, "rate_period": "2s"}},
		{"RateBurst", `{"rate_burst":50}`, map[string]any{"rate_burst": 50.0}},
		{"Concurrency", `{"concurrency":9}`, map[string]any{"concurrency": 9.0}},
		{"ConcurrencyNull", `{"concurrency":null}`, map[string]any{"concurrency": nil}},
		{"TokensPerMinute", `{"tokens_per_minute":null}`, map[string]any{"tokens_per_minute": nil}},
		{"BudgetMicros", `{"budget_micros":2500000}`, map[string]any{"budget_micros": 2500000.0, "budget_usd": "2.50"}},
		{"BudgetUSD", `{"budget_usd":"2.5"}`, map[string]any{"budget_micros": 2500000.0, "budget_usd": "2.50"}},
		{"BudgetUSDDollarSign", `{"budget_usd":"$0.000001"}`, map[string]any{"budget_micros": 1.0, "budget_usd": "0.000001"}},
		{"BudgetZero", `{"budget_usd":"0"}`, map[string]any{"budget_micros": 0.0, "budget_usd": "0.00"}},
		{"BudgetNull", `{"budget_usd":null}`, map[string]any{"budget_micros": nil, "budget_usd": nil}},
		{"BudgetMicrosNull", `{"budget_micros":null}`, map[string]any{"budget_micros": nil, "budget_usd": nil}},
		{"BudgetBothUnitsAgree", `{"budget_usd":"3.00","budget_micros":3000000}`, map[string]any{"budget_micros": 3000000.0, "budget_usd": "3.00"}},
		{"BudgetPeriod", `{"budget_period":"daily"}`, map[string]any{"budget_period": "daily"}},
		{"Nothing", `{}`, map[string]any{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := e.limitsFixture(acme, strings.ToLower(tt.name)+"@acme.test")
			path := "/api/v1/members/" + strconv.FormatInt(m.ID, 10) + "/limits"
			want := e.limitsAt(owner, path)
			maps.Copy(want, tt.want)
			r := e.call(owner, http.MethodPatch, path, tt.body)
			if r.status != http.StatusOK {
				t.Fatalf("PATCH %s: %d %s", tt.body, r.status, r.body)
			}
			var answered map[string]any
			r.decode(t, &answered)
			got := e.limitsAt(owner, path)
			if !maps.EqualFunc(got, want, equalJSON) || !maps.EqualFunc(answered, want, equalJSON) {
				t.Errorf("PATCH %s:\nread back %v\nanswered  %v\nwant      %v", tt.body, got, answered, want)
			}
		})
	}

	m, _ := e.limitsFixture(acme, "bad@acme.test")
	path := "/api/v1/members/" + strconv.FormatInt(m.ID, 10) + "/limits"
	before := e.limitsAt(owner, path)
	for _, tt := range []struct{ name, body, location string }{
		{"BudgetWords", `{"budget_usd":"5 dollars"}`, "body.budget_usd"},
		{"BudgetNegative", `{"budget_usd":"-5"}`, "body.budget_usd"},
		{"BudgetFinerThanMicro", `{"budget_usd":"0.0000001"}`, "body.budget_usd"},
		{"BudgetAsNumber", `{"budget_usd":5}`, "body.budget_usd"},
		{"BudgetUnitsDisagree", `{"budget_usd":"5.00","budget_micros":4000000}`, "body.budget_usd"},
		{"BudgetNullAndValue", `{"budget_usd":null,"budget_micros":4000000}`, "body.budget_usd"},
		{"PeriodWords", `{"rate_period":"5 parsecs"}`, "body.rate_period"},
		{"PeriodISO", `{"rate_period":"PT1M"}`, "body.rate_period"},
		{"PeriodFractionOfMS", `{"rate_period":"1500us"}`, "body.rate_period"},
		{"PeriodPast366Days", `{"rate_period":"8785h"}`, "body.rate_period"},
		{"PeriodUnitsDisagree", `{"rate_period":"1s","rate_period_ms":2000}`, "body.rate_period"},
		{"UnknownUnit", `{"budget_dollars":"5.00"}`, "body.budget_dollars"},
		{"AlgorithmNull", `{"rate_algorithm":null}`, "body.rate_algorithm"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			audited := e.auditCount()
			p := e.call(owner, http.MethodPatch, path, tt.body).problem(t, http.StatusUnprocessableEntity)
			if p.Type != api422 || len(p.Errors) == 0 || p.Errors[0].Location != tt.location {
				t.Errorf("PATCH %s: %+v, want a validation problem at %s", tt.body, p, tt.location)
			}
			if after := e.limitsAt(owner, path); !maps.EqualFunc(after, before, equalJSON) {
				t.Errorf("refused, yet the limits changed:\nbefore %v\nafter  %v", before, after)
			}
			if n := e.auditCount(); n != audited {
				t.Errorf("refused, yet %d audit rows were written", n-audited)
			}
		})
	}
}

// TestLimitsPutNamesEveryField: a PUT that leaves a limit out is a 422
// naming each one it left out, and changes nothing: the old PUT of a rate
// limit alone silently dropped the budget and the concurrency cap. A PUT of
// every field (what GET answers, as it is) replaces them all.
func TestLimitsPutNamesEveryField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	m, _ := e.limitsFixture(acme, "ada@acme.test")
	member := "/api/v1/members/" + strconv.FormatInt(m.ID, 10) + "/limits"
	if _, err := e.st.CreateTier(context.Background(), store.ActorCLI, acme.ID, store.NewTier("core")); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name, path, body string
		missing          []string
	}{
		{"MemberRateAlone", member, `{"rate_limit":10}`, []string{"body.rate_algorithm", "body.rate_period_ms", "body.rate_burst",
			"body.concurrency", "body.tokens_per_minute", "body.budget_micros", "body.budget_period"}},
		{"MemberAllButBudget", member, `{"rate_algorithm":"token_bucket","rate_limit":10,"rate_period":"1s","rate_burst":null,` +
			`"concurrency":null,"tokens_per_minute":null,"budget_period":"monthly"}`, []string{"body.budget_micros"}},
		{"TeamEmpty", "/api/v1/limits", `{}`, []string{"body.rate_algorithm", "body.rate_limit", "body.rate_period_ms", "body.rate_burst",
			"body.concurrency", "body.tokens_per_minute", "body.budget_micros", "body.budget_period"}},
		{"TierLimitsPartial", "/api/v1/tiers/core", `{"limits":{"rate_limit":5},"weight":1}`, []string{"body.auto_approve_micros", "body.over_budget",
			"body.limits.rate_algorithm", "body.limits.rate_period_ms", "body.limits.rate_burst", "body.limits.concurrency",
			"body.limits.tokens_per_minute", "body.limits.budget_micros", "body.limits.budget_period"}},
		{"TierNoLimits", "/api/v1/tiers/core", `{"weight":1,"auto_approve_usd":"1.00"}`, []string{"body.limits", "body.over_budget"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.limitsAt(owner, member)
			p := e.call(owner, http.MethodPut, tt.path, tt.body).problem(t, http.StatusUnprocessableEntity)
			var at []string
			for _, d := range p.Errors {
				at = append(at, d.Location)
			}
			if p.Type != api422 || strings.Join(at, " ") != strings.Join(tt.missing, " ") {
				t.Errorf("PUT %s: %+v\nnames %v, want %v", tt.body, p, at, tt.missing)
			}
			for _, name := range tt.missing {
				if !strings.Contains(p.Detail, strings.TrimPrefix(name, "body.")) {
					t.Errorf("the detail %q does not name %s", p.Detail, name)
				}
			}
			if after := e.limitsAt(owner, member); !maps.EqualFunc(after, before, equalJSON) {
				t.Errorf("refused, yet the member's limits changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}

	// What GET answers can be PUT back as it is, with one field changed.
	l := e.limitsAt(owner, member)
	l["concurrency"] = 8.0
	r := e.call(owner, http.MethodPut, member, l)
	if r.status != http.StatusOK {
		t.Fatalf("PUT what GET answered: %d %s", r.status, r.body)
	}
	if got := e.limitsAt(owner, member); !maps.EqualFunc(got, l, equalJSON) {
		t.Errorf("PUT of every field:\ngot  %v\nwant %v", got, l)
	}
	// A whole PUT with nulls removes those limits; the rest are as given.
	full := `{"rate_algorithm":"token_bucket","rate_limit":null,"rate_period":"1s","rate_burst":null,"concurrency":2,` +
		`"tokens_per_minute":null,"budget_usd":null,"budget_period":"daily"}`
	if r := e.call(owner, http.MethodPut, member, full); r.status != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", full, r.status, r.body)
	}
	got := e.limitsAt(owner, member)
	if got["rate_limit"] != nil || got["budget_micros"] != nil || got["concurrency"] != 2.0 || got["budget_period"] != "daily" {
		t.Errorf("after a PUT with nulls: %v", got)
	}
}

// TestLimitsAuditShowsOnlyTheChange: the audit row of a PATCH of the rate
// limit differs before and after in the rate limit alone.
func TestLimitsAuditShowsOnlyTheChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	owner := e.token(&acme.ID, store.TokenRoleOwner)
	m, was := e.limitsFixture(acme, "ada@acme.test")
	if r := e.call(owner, http.MethodPatch, "/api/v1/members/"+strconv.FormatInt(m.ID, 10)+"/limits", `{"rate_limit":99}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	entries, err := e.st.Audit(context.Background(), &acme.ID, 1)
	if err != nil || len(entries) != 1 || entries[0].Action != store.ActionMemberLimits {
		t.Fatalf("audit: %v %+v", err, entries)
	}
	var before, after store.Limits
	if err := json.Unmarshal(entries[0].Before, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(entries[0].After, &after); err != nil {
		t.Fatal(err)
	}
	want := was
	want.RateLimit = 99
	if after.RateLimit != 99 || after.Budget == nil || *after.Budget != *was.Budget || after.Concurrency != was.Concurrency ||
		after.TokensPerMinute != was.TokensPerMinute || after.RateBurst != was.RateBurst || after.BudgetPeriod != was.BudgetPeriod {
		t.Errorf("audit after = %+v, want %+v", after, want)
	}
}

func equalJSON(a, b any) bool {
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	return string(ra) == string(rb)
}
