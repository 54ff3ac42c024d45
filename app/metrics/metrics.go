// Package metrics is the gateway's Prometheus instrumentation: a proxy.Observer
// that counts every request, a limiter wrapper that times admission, and
// collectors that read the config snapshot, the ledger backlog and the Redis
// fallback counts when Prometheus scrapes.
//
// Every label value comes from the operator's configuration or from a fixed
// list in this file, never from the request: a team's name, a member's id, a
// route's prefix, a refusal code. A request that resolved no key or route is
// counted under "unknown" and "none", and a method or refusal code outside the
// lists as "other", so no caller can add a series. Members are labelled by id,
// not email: the id is stable and is not personal data, which matters once
// metrics leave the gateway for a hosted Prometheus; the console maps ids to
// people.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/breaker"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// Snapshots is the config the collectors read at scrape time; *snapshot.Source is one.
type Snapshots interface {
	Current() *proxy.Snapshot
	Reloads() int64
}

// Ledger is the ledger writer's backlog; *ledger.Writer is one.
type Ledger interface {
	Backlog() (rows int, age time.Duration)
}

// Options are what the metrics read besides the requests themselves.
type Options struct {
	Snapshots Snapshots
	Ledger    Ledger
	// RedisStats reads the decisions the Redis limiter took without Redis; nil
	// without REDIS_URL.
	RedisStats func() limiter.Stats
	// Now is the clock for the snapshot's age (default time.Now).
	Now func() time.Time
}

// Metrics owns a registry of its own (never the global one), so tests and
// several apps in one process do not collide.
type Metrics struct {
	reg  *prometheus.Registry
	snap Snapshots

	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	ttfb      *prometheus.HistogramVec
	decisions *prometheus.CounterVec
	admission prometheus.Histogram
	spend     *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	budget    *prometheus.GaugeVec
	inFlight  prometheus.Gauge
	waiting   *prometheus.GaugeVec
	queued    *prometheus.HistogramVec
	security  *prometheus.CounterVec
	upstream  *prometheus.CounterVec

	breakerState       *prometheus.GaugeVec
	breakerTransitions *prometheus.CounterVec
	ejections          *prometheus.CounterVec
	retries            *prometheus.CounterVec
	retryBudget        *prometheus.CounterVec
}

var (
	_ proxy.Observer         = (*Metrics)(nil)
	_ proxy.UpstreamObserver = (*Metrics)(nil)
	_ proxy.QueueObserver    = (*Metrics)(nil)
)

// New registers every tollgate_* metric and the Go and process collectors.
func New(o Options) *Metrics {
	if o.Now == nil {
		o.Now = time.Now
	}
	reg := prometheus.NewRegistry()
	f := factory{reg}
	m := &Metrics{
		reg:  reg,
		snap: o.Snapshots,
		requests: f.counter("tollgate_requests_total", "Requests the gateway answered.",
			"team", "member", "route", "method", "code_class"),
		duration: f.histogram("tollgate_request_duration_seconds", "Time from a request's arrival to the end of its response, streams included.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, "team", "route"),
		ttfb: f.histogram("tollgate_upstream_ttfb_seconds", "Time from a request's admission to the upstream's response headers.",
			[]float64{.025, .05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120}, "route"),
		decisions: f.counter("tollgate_admission_decisions_total",
			"The gateway's verdict on each request: admitted, or refused with the control that refused it.", "outcome", "reason"),
		spend: f.counter("tollgate_spend_micros_total", "Micro-dollars charged, from the providers' reported usage.", "team", "member"),
		tokens: f.counter("tollgate_tokens_total", "Tokens the providers reported, by class (input, output, cache_read, cache_write).",
			"team", "member", "class"),
		budget: f.gauge("tollgate_budget_remaining_micros",
			"The tightest of the member's and the team's budgets after the member's latest request, in micro-dollars.", "team", "member"),
		waiting: f.gauge("tollgate_queue_waiting",
			"Requests waiting in their team's fair waiting room on this replica (sum over replicas for the room's depth).", "team", "member"),
		queued: f.histogram("tollgate_queue_wait_seconds", "Time a request waited in its team's fair waiting room, admitted or not.",
			[]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10, 30, 60}, "team", "member"),
		security: f.counter("tollgate_security_events_total", "Security events: a control refused or flagged something.", "control", "outcome"),
		upstream: f.counter("tollgate_upstream_errors_total", "Upstream calls that got no answer, by why.", "route", "kind"),
		breakerState: f.gauge("tollgate_upstream_breaker_state",
			"Circuit breaker of each upstream target: 0 closed, 1 open, 2 half-open.", "upstream", "credential"),
		breakerTransitions: f.counter("tollgate_upstream_breaker_transitions_total",
			"Circuit breaker state changes, by the state entered.", "upstream", "credential", "to"),
		ejections: f.counter("tollgate_upstream_ejections_total",
			"Targets taken out of rotation after consecutive failures.", "upstream", "credential"),
		retries: f.counter("tollgate_upstream_retries_total",
			"Idempotent requests sent again after a failed attempt.", "route", "upstream"),
		retryBudget: f.counter("tollgate_upstream_retry_budget_exhausted_total",
			"Retries not made because the route's retry budget (20% of its requests over 10s) was spent.", "route"),
	}
	m.admission = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tollgate_admission_duration_seconds",
		Help:    "Time of one admission call (Redis round trip or in-process limiter).",
		Buckets: []float64{.0002, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5}})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_in_flight", Help: "Admitted requests not yet finished on this replica."})
	reg.MustRegister(m.admission, m.inFlight,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.Snapshots != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_config_reloads_total",
				Help: "Config snapshots loaded, the first included."}, func() float64 { return float64(o.Snapshots.Reloads()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_snapshot_age_seconds",
				Help: "Age of the config snapshot in force (the poll interval bounds it while Postgres answers)."},
				func() float64 { return o.Now().Sub(o.Snapshots.Current().LoadedAt).Seconds() }))
	}
	if o.Ledger != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_ledger_pending_rows",
				Help: "Ledger rows waiting to be written to Postgres."},
				func() float64 { rows, _ := o.Ledger.Backlog(); return float64(rows) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_ledger_oldest_pending_seconds",
				Help: "How long the oldest unwritten ledger row has waited; paid routes fail closed past 30s."},
				func() float64 { _, age := o.Ledger.Backlog(); return age.Seconds() }))
	}
	if o.RedisStats != nil {
		reg.MustRegister(redisCollector(o.RedisStats))
	}
	return m
}

// BreakerChanged implements proxy.UpstreamObserver.
func (m *Metrics) BreakerChanged(upstream, credentialEnv string, _, to breaker.State) {
	m.breakerState.WithLabelValues(upstream, credentialEnv).Set(float64(to))
	m.breakerTransitions.WithLabelValues(upstream, credentialEnv, to.String()).Inc()
}

// Ejected implements proxy.UpstreamObserver.
func (m *Metrics) Ejected(upstream, credentialEnv string, _ time.Duration) {
	m.ejections.WithLabelValues(upstream, credentialEnv).Inc()
}

// Retried implements proxy.UpstreamObserver.
func (m *Metrics) Retried(route, upstream string) {
	m.retries.WithLabelValues(routeLabel(route), upstream).Inc()
}

// RetryBudgetExhausted implements proxy.UpstreamObserver.
func (m *Metrics) RetryBudgetExhausted(route string) {
	m.retryBudget.WithLabelValues(routeLabel(route)).Inc()
}

// Handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry the metrics live in, for tests that gather it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Started counts an admitted request in flight.
func (m *Metrics) Started(int64, int64) { m.inFlight.Inc() }

// Finished counts one answered request.
func (m *Metrics) Finished(o proxy.Outcome) {
	if o.Admitted {
		m.inFlight.Dec()
	}
	team, member, route := m.teamLabel(o.TeamID), memberLabel(o.MemberID), routeLabel(o.RoutePrefix)
	m.requests.WithLabelValues(team, member, route, Method(o.Method), codeClass(o.Status)).Inc()
	m.duration.WithLabelValues(team, route).Observe(o.Duration.Seconds())
	if o.UpstreamStatus != 0 {
		m.ttfb.WithLabelValues(route).Observe(o.TTFB.Seconds())
	}
	if o.UpstreamError != "" {
		m.upstream.WithLabelValues(route, pick(o.UpstreamError, upstreamErrors)).Inc()
	}
	outcome, reason := "admitted", "none"
	if !o.Admitted {
		outcome, reason = "refused", pick(o.Refusal, refusals)
	}
	m.decisions.WithLabelValues(outcome, reason).Inc()
	if o.TeamID == 0 {
		return
	}
	if o.Queued > 0 {
		m.queued.WithLabelValues(team, member).Observe(o.Queued.Seconds())
	}
	if o.CostMicros > 0 {
		m.spend.WithLabelValues(team, member).Add(float64(o.CostMicros))
	}
	u := o.Usage
	for _, c := range [...]struct {
		class string
		n     int64
	}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cache_read", u.CacheReadTokens}, {"cache_write", u.CacheWriteTokens}} {
		if c.n > 0 {
			m.tokens.WithLabelValues(team, member, c.class).Add(float64(c.n))
		}
	}
	if o.BudgetRemaining >= 0 {
		m.budget.WithLabelValues(team, member).Set(float64(o.BudgetRemaining))
	}
}

// Queued counts a request entering (+1) or leaving (-1) its team's waiting room.
func (m *Metrics) Queued(teamID, memberID int64, delta int) {
	m.waiting.WithLabelValues(m.teamLabel(teamID), memberLabel(memberID)).Add(float64(delta))
}

// SecurityEvent counts one security event; control and outcome are the fixed
// names the code that reports the event uses.
func (m *Metrics) SecurityEvent(control, outcome string) {
	m.security.WithLabelValues(control, outcome).Inc()
}

// Limiter wraps l so that every admission call is timed.
func (m *Metrics) Limiter(l limiter.Limiter) limiter.Limiter { return timedLimiter{l, m.admission} }

type timedLimiter struct {
	limiter.Limiter
	h prometheus.Histogram
}

func (t timedLimiter) Admit(ctx context.Context, req limiter.Request) (limiter.Decision, error) {
	start := time.Now()
	d, err := t.Limiter.Admit(ctx, req)
	t.h.Observe(time.Since(start).Seconds())
	return d, err
}

// AdmitAfter is timed as one admission, the settles it carries included.
func (t timedLimiter) AdmitAfter(ctx context.Context, ss []limiter.Settlement, req limiter.Request) (limiter.Decision, []error, error) {
	start := time.Now()
	d, errs, err := t.Limiter.AdmitAfter(ctx, ss, req)
	t.h.Observe(time.Since(start).Seconds())
	return d, errs, err
}

func (m *Metrics) teamLabel(id int64) string {
	if id == 0 || m.snap == nil {
		return "unknown"
	}
	if t, ok := m.snap.Current().Team(id); ok && t.Name != "" {
		return t.Name
	}
	return "unknown"
}

func memberLabel(id int64) string {
	if id == 0 {
		return "unknown"
	}
	return strconv.FormatInt(id, 10)
}

func routeLabel(prefix string) string {
	if prefix == "" {
		return "none"
	}
	return prefix
}

// methods are the label values a request's method may take; any other is "other".
var methods = set("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

// Method is the request method as a bounded label value.
func Method(m string) string { return pick(m, methods) }

// refusals are the fixed codes of proxy.Outcome.Refusal.
var refusals = set("bad_request", "invalid_key", "revoked", "expired", "cut_off", "no_route", "route_disabled", "no_credential",
	"bad_body", "ledger_unavailable", "rate", "concurrency", "tpm", "budget", "unavailable", "rebuild", "queued")

var upstreamErrors = set("forbidden_address", "timeout", "unreachable", "client_gone", "circuit_open",
	"response_too_large", "request_timeout", "stream_idle", "provider_limited")

func codeClass(status int) string {
	if status < 100 || status > 599 {
		return "none" // the caller went away before an answer was written
	}
	return strconv.Itoa(status/100) + "xx"
}

func pick(v string, allowed map[string]bool) string {
	if allowed[v] {
		return v
	}
	return "other"
}

func set(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// WatchSettles reports the gateway's settle queue: its depth, and what it
// retried, abandoned or ran on the request.
func (m *Metrics) WatchSettles(read func() proxy.SettleStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_settle_queue_depth",
			Help: "Settles waiting to run after their responses."},
			func() float64 { return float64(read().Queued) }),
		settleCollector{read: read, desc: prometheus.NewDesc("tollgate_settles_total",
			"Settles that did not simply run once after their response: retried after a failure, abandoned after every "+
				"retry (the hold is charged in full when its lease ends), or run on the request because the queue was full.",
			[]string{"outcome"}, nil)})
}

// WatchProviderLimits reports what the gateway learned of each provider
// target's account (proxy/providerlimits): the capacity the provider last
// said was left, and the requests held or refused because of it. Targets are
// labelled by upstream host and credential variable, the operator's config.
func (m *Metrics) WatchProviderLimits(read func() []providerlimits.Stat) {
	m.reg.MustRegister(providerLimitCollector{read: read,
		remaining: prometheus.NewDesc("tollgate_provider_limit_remaining",
			"What the provider last reported left of the account's rate limit, by kind (requests, tokens); absent until it has.",
			[]string{"upstream", "credential", "kind"}, nil),
		decisions: prometheus.NewDesc("tollgate_provider_limit_decisions_total",
			"Requests the gateway held (waited for the account's capacity, then sent) or refused with its own 429 "+
				"instead of sending them into a known provider 429.",
			[]string{"upstream", "credential", "decision"}, nil)})
}

type providerLimitCollector struct {
	read                 func() []providerlimits.Stat
	remaining, decisions *prometheus.Desc
}

func (c providerLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.remaining
	ch <- c.decisions
}

func (c providerLimitCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.read() {
		for kind, n := range map[string]int64{"requests": s.RequestsRemaining, "tokens": s.TokensRemaining} {
			if n >= 0 {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(n), s.Upstream, s.Credential, kind)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(s.Held), s.Upstream, s.Credential, "held")
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(s.Refused), s.Upstream, s.Credential, "refused")
	}
}

type settleCollector struct {
	read func() proxy.SettleStats
	desc *prometheus.Desc
}

func (c settleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c settleCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	for outcome, n := range map[string]uint64{"retried": s.Retried, "abandoned": s.Abandoned, "inline": s.Inline} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), outcome)
	}
}

// redisStats reports limiter.Redis.Stats as one counter family.
type redisStats struct {
	read func() limiter.Stats
	desc *prometheus.Desc
}

func redisCollector(read func() limiter.Stats) prometheus.Collector {
	return redisStats{read: read, desc: prometheus.NewDesc("tollgate_redis_fallback_decisions_total",
		"Admission decisions taken without Redis: fail_open_allowed and fail_open_refused by the local twin while Redis "+
			"was unreachable, fail_closed refused as unavailable, cached_refusal from the over-limit cache.",
		[]string{"decision"}, nil)}
}

func (r redisStats) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r redisStats) Collect(ch chan<- prometheus.Metric) {
	s := r.read()
	for decision, n := range map[string]uint64{"fail_open_allowed": s.FailOpenAllowed, "fail_open_refused": s.FailOpenRefused,
		"fail_closed": s.FailClosed, "cached_refusal": s.CachedRefusals} {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n), decision)
	}
}
