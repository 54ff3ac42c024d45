package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/store"
)

// TestOutOfRangeRefused: a number out of range (wrapping when converted,
// negative, zero where it means nothing, past its bound, a fraction or
// exponent, past int64) or a string that is not UTF-8, on every writing
// operation, is a 422 problem naming the field, and nothing is stored: every
// readable setting and the audit log read back as before.
func TestOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	acme := e.team("acme")
	f := e.fixture(acme, "ada@acme.test")
	owner, deployment := e.token(&acme.ID, store.TokenRoleOwner), e.token(nil, store.TokenRoleOwner)
	member := "/api/v1/members/" + strconv.FormatInt(f.member.ID, 10)
	route := "/api/v1/routes/" + strconv.FormatInt(f.route.ID, 10)
	decline := "/api/v1/budget-requests/" + strconv.FormatInt(f.request.ID, 10) + "/decline"
	const price = `"input_micros_per_mtok":3000000,"output_micros_per_mtok":15000000,"max_output_tokens":8192`
	if r := e.call(deployment, http.MethodPut, "/api/v1/prices/claude-x", "{"+price+"}"); r.status != http.StatusOK {
		t.Fatalf("setPrice: %d %s", r.status, r.body)
	}

	// state is everything the cases below could change, as the API reads it.
	state := func() string {
		var b strings.Builder
		for _, path := range []string{"/api/v1/limits", member + "/limits", "/api/v1/tiers", "/api/v1/members", "/api/v1/keys",
			"/api/v1/routes", "/api/v1/budget-requests"} {
			b.Write(e.call(owner, http.MethodGet, path, nil).body)
		}
		b.Write(e.call(deployment, http.MethodGet, "/api/v1/prices", nil).body)
		return b.String()
	}

	for _, tt := range []struct {
		name, token, method, path, body, location string
	}{
		{"PeriodWrapsToOneMS", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":288230376151711745}`, "body.rate_period_ms"},
		{"PeriodPastInt64", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":9223372036854775808}`, "body.rate_period_ms"},
		{"PeriodNegative", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":-1}`, "body.rate_period_ms"},
		{"PeriodZero", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":0}`, "body.rate_period_ms"},
		{"PeriodFraction", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":1.5}`, "body.rate_period_ms"},
		{"PeriodHuge", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":1e30}`, "body.rate_period_ms"},
		{"PeriodExponent", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_period_ms":1e3}`, "body.rate_period_ms"},
		{"PeriodPast366Days", owner, http.MethodPatch, member + "/limits", `{"rate_period_ms":31622400001}`, "body.rate_period_ms"},
		{"RatePast2^51", owner, http.MethodPatch, member + "/limits", `{"rate_limit":2251799813685249}`, "body.rate_limit"},
		{"BurstPast2^53", owner, http.MethodPatch, member + "/limits", `{"rate_limit":10,"rate_burst":9007199254740}`, "body.rate_burst"},
		{"ConcurrencyPast2^53", owner, http.MethodPatch, member + "/limits", `{"concurrency":9007199254740993}`, "body.concurrency"},
		{"TPMPastBound", owner, http.MethodPatch, member + "/limits", `{"tokens_per_minute":9223372036854775807}`, "body.tokens_per_minute"},
		{"BudgetPast2^51", owner, http.MethodPatch, member + "/limits", `{"budget_micros":2251799813685249}`, "body.budget_micros"},
		{"BudgetNegative", owner, http.MethodPatch, member + "/limits", `{"budget_micros":-1}`, "body.budget_micros"},
		{"TeamPeriodWraps", owner, http.MethodPatch, "/api/v1/limits", `{"rate_limit":10,"rate_period_ms":288230376151711745}`, "body.rate_period_ms"},
		{"TeamBudgetExponent", owner, http.MethodPatch, "/api/v1/limits", `{"budget_micros":1e3}`, "body.budget_micros"},
		{"TeamBudgetPeriodNotUTF8", owner, http.MethodPatch, "/api/v1/limits", "{\"budget_micros\":1,\"budget_period\":\"dai\xffly\"}", "body.budget_period"},
		{"NewTierPeriodWraps", owner, http.MethodPost, "/api/v1/tiers", `{"name":"bots","limits":{"rate_limit":10,"rate_period_ms":288230376151711745}}`, "body.limits.rate_period_ms"},
		{"NewTierConcurrency", owner, http.MethodPost, "/api/v1/tiers", `{"name":"bots","limits":{"concurrency":9007199254740993}}`, "body.limits.concurrency"},
		{"NewTierAutoApprovePastInt64", owner, http.MethodPost, "/api/v1/tiers", `{"name":"bots","limits":{},"auto_approve_micros":9223372036854775808}`, "body.auto_approve_micros"},
		{"NewTierWeightFraction", owner, http.MethodPost, "/api/v1/tiers", `{"name":"bots","limits":{},"weight":1.5}`, "body.weight"},
		{"TierPeriodWraps", owner, http.MethodPatch, "/api/v1/tiers/core", `{"limits":{"rate_limit":10,"rate_period_ms":288230376151711745}}`, "body.limits.rate_period_ms"},
		{"TierAutoApprovePastBound", owner, http.MethodPatch, "/api/v1/tiers/core", `{"limits":{},"auto_approve_micros":100000000001}`, "body.auto_approve_micros"},
		{"TierBudgetPastBound", owner, http.MethodPatch, "/api/v1/tiers/core", `{"limits":{"budget_micros":2251799813685249}}`, "body.limits.budget_micros"},
		{"PriceRatePastBound", deployment, http.MethodPut, "/api/v1/prices/claude-x", `{"input_micros_per_mtok":9223372036854775807,"output_micros_per_mtok":1,"max_output_tokens":1}`, "body.input_micros_per_mtok"},
		{"PriceRateExponent", deployment, http.MethodPut, "/api/v1/prices/claude-x", `{"input_micros_per_mtok":3e6,"output_micros_per_mtok":1,"max_output_tokens":1}`, "body.input_micros_per_mtok"},
		{"PriceMaxOutputPastInt64", deployment, http.MethodPut, "/api/v1/prices/claude-x", `{` + price[:strings.LastIndex(price, ":")] + `:9223372036854775808}`, "body.max_output_tokens"},
		{"PriceTierThresholdNegative", deployment, http.MethodPut, "/api/v1/prices/claude-x", `{` + price + `,"tier_threshold_tokens":-1}`, "body.tier_threshold_tokens"},
		{"PriceProviderNotUTF8", deployment, http.MethodPut, "/api/v1/prices/claude-x", "{" + price + ",\"provider\":\"anthr\xffopic\"}", "body.provider"},
		{"AttemptsPastInt64", owner, http.MethodPut, route + "/resilience", `{"max_attempts":18446744073709551617}`, "body.max_attempts"},
		{"AttemptsFraction", owner, http.MethodPut, route + "/resilience", `{"max_attempts":2.5}`, "body.max_attempts"},
		{"KeyNameNotUTF8", owner, http.MethodPost, member + "/keys", "{\"name\":\"lap\xfftop\"}", "body.name"},
		{"KeyNameLoneSurrogate", owner, http.MethodPost, member + "/keys", `{"name":"lap\ud800top"}`, "body.name"},
		{"EmailNotUTF8", owner, http.MethodPost, "/api/v1/members", "{\"email\":\"gr\xe9ce@acme.test\"}", "body.email"},
		{"NoteNotUTF8", owner, http.MethodPost, decline, "{\"note\":\"no\xc0\"}", "body.note"},
		{"UpstreamNotUTF8", owner, http.MethodPost, route + "/targets", "{\"upstream_url\":\"http://127.0.0.1:7/\xff\"}", "body.upstream_url"},
		{"GraceNegative", owner, http.MethodPost, "/api/v1/keys/" + f.key.ID + "/rotate?grace=-1s", "", "query.grace"},
		{"GraceNotUTF8", owner, http.MethodPost, "/api/v1/keys/" + f.key.ID + "/rotate?grace=1%FFh", "", "query.grace"},
		{"PathNotUTF8", owner, http.MethodPut, "/api/v1/tiers/co%FFre", `{"limits":{}}`, "path.name"},
		{"ModelNotUTF8", deployment, http.MethodPut, "/api/v1/prices/claude-%FF", "{" + price + "}", "path.model"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, audited := state(), e.auditCount()
			p := e.call(tt.token, tt.method, tt.path, tt.body).problem(t, http.StatusUnprocessableEntity)
			if p.Type != api422 || len(p.Errors) != 1 || p.Errors[0].Location != tt.location || p.Detail == "" {
				t.Errorf("%s %s %s: %+v, want a validation problem at %s", tt.method, tt.path, tt.body, p, tt.location)
			}
			if after := state(); after != before {
				t.Errorf("refused, yet the API reads otherwise:\nbefore %s\nafter  %s", before, after)
			}
			if n := e.auditCount(); n != audited {
				t.Errorf("refused, yet %d audit rows were written", n-audited)
			}
		})
	}
}

const api422 = "urn:tollgate:problem:validation"
