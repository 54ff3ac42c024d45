package store_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// TestLimitsValidateNamesField: each limit past its bound is refused naming
// the field as the admin API spells it, whatever the surface that set it.
func TestLimitsValidateNamesField(t *testing.T) {
	t.Parallel()
	budget := func(v int64) *int64 { return &v }
	for _, tt := range []struct {
		name  string
		l     store.Limits
		field string
	}{
		{"PeriodPast366DaysWithoutRate", store.Limits{RatePeriod: 367 * 24 * time.Hour}, "rate_period_ms"},
		{"PeriodNotWholeMS", store.Limits{RateLimit: 1, RatePeriod: 1500 * time.Microsecond}, "rate_period_ms"},
		{"PeriodZero", store.Limits{RateLimit: 1}, "rate_period_ms"},
		{"RateNegative", store.Limits{RateLimit: -1, RatePeriod: time.Second}, "rate_limit"},
		{"RatePastBound", store.Limits{RateLimit: store.MaxRateLimit + 1, RatePeriod: time.Second}, "rate_limit"},
		{"BurstNegative", store.Limits{RateLimit: 1, RateBurst: -1, RatePeriod: time.Second}, "rate_burst"},
		{"BurstTimesPeriodPast2^53", store.Limits{RateLimit: 1, RateBurst: 1 << 40, RatePeriod: time.Hour}, "rate_burst"},
		{"BurstWithWindow", store.Limits{RateAlgorithm: "sliding_window", RateLimit: 1, RateBurst: 2, RatePeriod: time.Second}, "rate_burst"},
		{"ConcurrencyPastBound", store.Limits{Concurrency: store.MaxConcurrency + 1, RatePeriod: time.Second}, "concurrency"},
		{"TPMNegative", store.Limits{TokensPerMinute: -1, RatePeriod: time.Second}, "tokens_per_minute"},
		{"BudgetPastBound", store.Limits{Budget: budget(store.MaxBudget + 1), RatePeriod: time.Second}, "budget_micros"},
		{"BudgetNegative", store.Limits{Budget: budget(-1), RatePeriod: time.Second}, "budget_micros"},
		{"UnknownAlgorithm", store.Limits{RateAlgorithm: "leaky", RatePeriod: time.Second}, "rate_algorithm"},
		{"UnknownBudgetPeriod", store.Limits{BudgetPeriod: "weekly", RatePeriod: time.Second}, "budget_period"},
	} {
		t.Run(tt.name, func(t *testing.T) { wantValidation(t, tt.l.Validate(), tt.field) })
	}
	if _, err := store.RatePeriodMS(1<<58 + 1); err == nil {
		t.Error("RatePeriodMS(2^58+1) converted; it wraps to 1 ms")
	}
	if d, err := store.RatePeriodMS(31_622_400_000); err != nil || d != 366*24*time.Hour {
		t.Errorf("RatePeriodMS(366 days) = %s, %v", d, err)
	}
}

// TestStoredPeriodPastDurationNotWrapped: a hand-edited row whose period no
// Duration holds reads back refused by Policy, not as the short period its
// product wraps to (2^58+1 ms × 10^6 is 1 ms modulo 2^64 ns).
func TestStoredPeriodPastDurationNotWrapped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.pool.Exec(t.Context(), `INSERT INTO member_limit (member_id, team_id, rate_limit, rate_period_ms) VALUES ($1, $2, 10, $3)`,
		f.member.ID, f.team.ID, int64(1<<58+1)); err != nil {
		t.Fatal(err)
	}
	l := must(f.st.MemberLimits(t.Context(), f.team.ID, f.member.ID))(t)
	if p, err := l.Policy(); err == nil {
		t.Fatalf("stored period 2^58+1 ms read as %s and enforced as %+v", l.RatePeriod, p.Rate)
	}
}
