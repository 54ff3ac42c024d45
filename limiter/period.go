package limiter

// Budget periods in integer arithmetic, the same in Go and in admit.lua: a period is
// named by an index (total: 0, daily: days since 1970-01-01, monthly: year×12 +
// month−1) and ends at a microsecond of the limiter's clock. The calendar math is
// Howard Hinnant's days_from_civil / civil_from_days, exact for every date from 1970.

// Period kinds as the scripts number them; 0 is none.
const (
	kindTotal   = 1
	kindDaily   = 2
	kindMonthly = 3
)

const dayMicros = 86_400_000_000

func (p Period) kind() int64 {
	switch p {
	case PeriodTotal:
		return kindTotal
	case PeriodDaily:
		return kindDaily
	case PeriodMonthly:
		return kindMonthly
	}
	return 0
}

// periodAt returns the index of the period of kind that contains now (µs since the
// Unix epoch, not negative) and the microsecond the next one starts (0 for total).
func periodAt(kind, now int64) (index, next int64) {
	day := now / dayMicros
	switch kind {
	case kindDaily:
		return day, (day + 1) * dayMicros
	case kindMonthly:
		y, m, _ := civilFromDays(day)
		if m == 12 {
			return y*12 + 11, daysFromCivil(y+1, 1, 1) * dayMicros
		}
		return y*12 + m - 1, daysFromCivil(y, m+1, 1) * dayMicros
	}
	return 0, 0
}

// civilFromDays is the proleptic Gregorian date of day z since 1970-01-01 (z >= 0).
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (y >= 1970).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := m - 3
	if m <= 2 {
		mp = m + 9
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// budgetKind is p's kind, 0 for no budget ("").
func budgetKind(p Period) int64 {
	if p == "" {
		return 0
	}
	return p.kind()
}
