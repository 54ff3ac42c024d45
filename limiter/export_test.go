package limiter

// Forget makes l lose everything about team, as Redis does on a flush or restart.
func (l *Local) Forget(team string) { l.forget(team) }

// PeriodAt exposes periodAt to the tests: the index of the period of p containing t
// (µs) and when the next one starts.
func PeriodAt(p Period, t int64) (index, next int64) { return periodAt(p.kind(), t) }
