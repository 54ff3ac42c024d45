package snapshot_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/snapshot"
)

// TestUntilNextPeriod: the boundary reload runs just after each UTC midnight,
// including when the clock is already past midnight but inside the slack.
func TestUntilNextPeriod(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want time.Duration
	}{
		{day.Add(12 * time.Hour), 12*time.Hour + 50*time.Millisecond},
		{day.Add(24*time.Hour - 100*time.Millisecond), 150 * time.Millisecond},
		{day.Add(10 * time.Millisecond), 40 * time.Millisecond},
		{day.Add(50 * time.Millisecond), 24 * time.Hour},
		{day.Add(12 * time.Hour).In(time.FixedZone("UTC+14", 14*3600)), 12*time.Hour + 50*time.Millisecond},
	} {
		if got := snapshot.UntilNextPeriod(c.now); got != c.want {
			t.Errorf("UntilNextPeriod(%s) = %s, want %s", c.now, got, c.want)
		}
	}
}
