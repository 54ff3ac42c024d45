package app

import (
	"context"
	"net/http"
	"runtime/debug"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/metrics"
	"github.com/tollgate/tollgate/app/observe"
	"github.com/tollgate/tollgate/app/tracing"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
)

// startTracing sets up the tracer: tp when a test passes one, else the OTLP
// exporter the OTEL_* variables name, else none at all.
func (a *App) startTracing(ctx context.Context, tp trace.TracerProvider) error {
	if tp == nil && !a.cfg.Tracing.Enabled() {
		return nil
	}
	if tp == nil {
		sdk, err := tracing.NewProvider(ctx, a.cfg.Tracing, buildVersion())
		if err != nil {
			return err
		}
		tp, a.closeTracing = sdk, sdk.Shutdown
		a.log.Info("tracing on", "endpoint", a.cfg.Tracing.Endpoint, "service", a.cfg.Tracing.ServiceName)
	}
	a.tracer = tracing.New(tp)
	a.tracer.TeamName = a.teamName
	return nil
}

// instrument wraps the gateway's transport and limiter and lists its
// observers: metrics (the Redis connection pool's included), the request log, security events, and (when tracing is
// on) spans around admission and each upstream attempt.
func (a *App) instrument(transport http.RoundTripper, lim limiter.Limiter) (http.RoundTripper, []proxy.Observer, limiter.Limiter) {
	lim = a.metrics.Limiter(lim)
	if a.redis != nil {
		a.metrics.Registry().MustRegister(metrics.RedisPool(a.redis.PoolStats))
	}
	observers := []proxy.Observer{
		a.metrics,
		observe.NewRequestLog(a.log, a.cfg.LogSampleEvery, names{a}),
		observe.NewSecurityEvents(a.log, names{a}),
	}
	if a.tracer != nil {
		transport = a.tracer.Transport(transport)
		lim = a.tracer.Limiter(lim)
		observers = append(observers, a.tracer.Observer())
	}
	return transport, observers, lim
}

// teamName is a team's name in the config snapshot, for logs, spans and metric
// labels: the operator chose it, no request can.
func (a *App) teamName(id int64) string {
	if t, ok := a.Snapshots.Current().Team(id); ok && t.Name != "" {
		return t.Name
	}
	return "unknown"
}

// names is observe.Names over the config snapshot.
type names struct{ a *App }

func (n names) TeamName(id int64) string { return n.a.teamName(id) }

// MemberEmail is "unknown" for a member the snapshot does not hold yet (added
// since the last reload), as teamName is for a team.
func (n names) MemberEmail(id int64) string {
	if m, ok := n.a.Snapshots.Current().Member(id); ok && m.Email != "" {
		return m.Email
	}
	return "unknown"
}

func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
