package views

import (
	"strconv"
	"strings"
	"time"
)

// Dashboard is the owners' live view of the team.
type Dashboard struct {
	Nav       Nav
	Checklist *Checklist // the team's first steps; nil once done
	StreamURL string     // the Server-Sent Events stream that pushes Live again
	// StaleAfter is how many milliseconds without an event make the page say
	// its figures are not live.
	StaleAfter string
	Live       DashboardLive
	Requests   []BudgetRequestRow // pending budget requests
}

// DashboardLive is the part of the dashboard the server pushes every second.
type DashboardLive struct {
	Updated   string // when the figures were read, HH:MM:SS UTC
	Connected bool   // live counters were readable; otherwise they show "—"
	Team      TeamSummary
	Rows      []DashboardRow
	Chart     Chart
}

// TeamSummary is the team's line above the table.
type TeamSummary struct {
	Requests   string // in the last minute, every member
	Refused    string // 429s, 402s and every other refusal
	Throttled  string
	OverBudget string
	InFlight   string
	Waited     string // requests that waited for a turn (X-Tollgate-Queued-Ms), with their mean wait
	Spend      Budget
	LimitsURL  string
}

// DashboardRow is one member's live figures.
type DashboardRow struct {
	ID          int64
	Email       string
	URL         string
	Status      string // what the row's badge says: active, cut off, over budget, throttled
	StatusClass string // the badge's class
	Requests    string // in the last minute
	Refused     string // refused in the last minute: 429s, 402s and the rest
	Throttled   string // 429s in the last minute
	OverBudget  string // 402s in the last minute
	Tokens      string // in the last minute
	InFlight    string
	Waited      string // requests that waited for a turn (X-Tollgate-Queued-Ms), with their mean wait
	Spend       Budget
	LastSeen    string
}

// Budget is spend in the current budget period against the budget, as a bar.
type Budget struct {
	Spent     string // "$1.23"
	Limit     string // "$10.00"; "" when there is no budget
	Remaining string // "$8.77"; "" when there is no budget
	Period    string // "this month", "today" or "in total"
	Resets    string // when the period ends; "" for a total budget
	Percent   int    // the bar's fill, 0 to 100
	Over      bool   // spend reached the budget
	// Short: not used up, but too little is left for one request (see
	// Usage.Shortfalls); the bar shows red like a spent budget.
	Short bool
}

// BudgetBar returns the bar's fill for spent of limit micro-dollars, in whole
// percent from 0 to 100; over says the budget is used up.
func BudgetBar(spent, limit int64) (percent int, over bool) {
	if limit <= 0 {
		return 100, true
	}
	if spent >= limit {
		return 100, true
	}
	if spent <= 0 {
		return 0, false
	}
	// Integer math: spent < limit, so this is below 100 and never overflows for
	// the budgets a limit accepts (< 2^53).
	p := int(spent * 100 / limit)
	return max(p, 1), false
}

// Chart is a server-rendered SVG of the team's last hour: spend per minute as
// bars, refused requests per minute (429s, 402s, 403s, ...) as a line.
type Chart struct {
	Label      string // the chart's text alternative
	Bars       []ChartBar
	Line       string // the refusals line's points
	MaxSpend   string // the spend axis' top
	MaxRefused string // the refusals axis' top
	Start      string // the first minute, HH:MM UTC
	End        string // the current minute, HH:MM UTC
}

// ChartBar is one minute's spend bar; Title is its tooltip.
type ChartBar struct {
	X, Y, H int
	Title   string
}

// ChartMinute is one minute of the chart's input.
type ChartMinute struct {
	Start       time.Time
	SpendMicros int64
	Refused     int64 // requests refused: 429, 402 and the rest
}

// The chart's drawing area, in SVG user units.
const (
	chartLeft   = 70
	chartTop    = 12
	chartHeight = 120
	chartStep   = 10 // per minute
	chartBarW   = 8
)

// NewChart lays out minutes (oldest first) as a Chart. formatDollars writes an
// amount of micro-dollars.
func NewChart(minutes []ChartMinute, formatDollars func(int64) string) Chart {
	var maxSpend, maxRefused, spend, refused int64
	for _, m := range minutes {
		maxSpend, maxRefused = max(maxSpend, m.SpendMicros), max(maxRefused, m.Refused)
		spend += m.SpendMicros
		refused += m.Refused
	}
	c := Chart{MaxSpend: "$" + formatDollars(maxSpend), MaxRefused: strconv.FormatInt(maxRefused, 10),
		Label: "Last hour: $" + formatDollars(spend) + " spent, " + strconv.FormatInt(refused, 10) + " requests refused (429, 402 or another refusal)."}
	if len(minutes) > 0 {
		c.Start = minutes[0].Start.UTC().Format("15:04")
		c.End = minutes[len(minutes)-1].Start.UTC().Format("15:04")
	}
	bottom := chartTop + chartHeight
	var points []string
	for i, m := range minutes {
		x := chartLeft + i*chartStep
		if m.SpendMicros > 0 {
			h := max(int(m.SpendMicros*chartHeight/maxSpend), 1)
			c.Bars = append(c.Bars, ChartBar{X: x + 1, Y: bottom - h, H: h,
				Title: m.Start.UTC().Format("15:04") + " UTC: $" + formatDollars(m.SpendMicros) + ", " + strconv.FormatInt(m.Refused, 10) + " refused"})
		}
		y := bottom
		if maxRefused > 0 {
			y = bottom - int(m.Refused*chartHeight/maxRefused)
		}
		points = append(points, strconv.Itoa(x+chartStep/2)+","+strconv.Itoa(y))
	}
	c.Line = strings.Join(points, " ")
	return c
}

func (Chart) width() string  { return strconv.Itoa(chartLeft + 60*chartStep + 52) }
func (Chart) height() string { return strconv.Itoa(chartTop + chartHeight + 26) }

func (c Chart) viewBox() string { return "0 0 " + c.width() + " " + c.height() }

// Fixed coordinates the chart's template uses.
var (
	chartBottom   = strconv.Itoa(chartTop + chartHeight)
	chartTopY     = strconv.Itoa(chartTop)
	chartLeftX    = strconv.Itoa(chartLeft)
	chartRightX   = strconv.Itoa(chartLeft + 60*chartStep)
	chartLabelY   = strconv.Itoa(chartTop + chartHeight + 18)
	chartBarWidth = strconv.Itoa(chartBarW)
	chartAxisText = strconv.Itoa(chartTop + 4)
	chartRightLbl = strconv.Itoa(chartLeft + 60*chartStep + 6)
	chartLeftLbl  = strconv.Itoa(chartLeft - 6)
)
