// Package tracing is the gateway's OpenTelemetry tracing: one server span per
// request on the public listener (continuing a caller's W3C traceparent), a
// child span around each admission and settlement call, and a client span for
// each upstream attempt that carries the trace on to the provider.
//
// Span attributes are chosen here, never copied wholesale from the request:
// the method, the status, operator-set names (team, route prefix, upstream
// host), ids the gateway made and fixed codes. No header, query, body, key or
// credential is ever an attribute, so a trace backend holds nothing a log
// must not.
//
// When tracing is off nothing here is installed: the router, the transport and
// the limiter are the bare ones.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/metrics"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/netguard"
)

// Tracer makes the gateway's spans.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// TeamName names a team for span attributes (from the config snapshot).
	TeamName func(teamID int64) string
}

// NewProvider returns the SDK tracer provider the configuration asks for: an
// OTLP/HTTP exporter behind a batching processor. The sampler follows
// OTEL_TRACES_SAMPLER (default: parent-based, always on). Call Shutdown on it
// to flush at exit.
func NewProvider(ctx context.Context, cfg config.Tracing, version string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(cfg.ServiceName), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// New returns a Tracer on tp.
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{
		tracer:   tp.Tracer("github.com/tollgate/tollgate"),
		prop:     propagation.TraceContext{},
		TeamName: func(int64) string { return "" },
	}
}

// Middleware starts the server span of every request, continuing the caller's
// traceparent when it sent one. The span is named by method until the gateway
// learns the route (Observer) or chi matched a console route.
func (t *Tracer) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := metrics.Method(r.Method)
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		ctx, span := t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.URLScheme(scheme)))
		defer span.End()
		rec := &statusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" && p != "/*" {
				span.SetName(method + " " + p)
				span.SetAttributes(semconv.HTTPRoute(p))
			}
		}
		if rec.status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(rec.status))
		}
		if rec.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	})
}

// Observer puts what the gateway decided on the request's server span.
func (t *Tracer) Observer() proxy.Observer { return spanObserver{t} }

type spanObserver struct{ t *Tracer }

func (spanObserver) Started(int64, int64) {}

func (s spanObserver) Finished(o proxy.Outcome) {
	if o.Ctx == nil {
		return
	}
	span := trace.SpanFromContext(o.Ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("tollgate.request_id", o.RequestID)}
	if o.RoutePrefix != "" {
		span.SetName(metrics.Method(o.Method) + " " + o.RoutePrefix)
		attrs = append(attrs, semconv.HTTPRoute(o.RoutePrefix))
	}
	if o.TeamID != 0 {
		attrs = append(attrs, attribute.String("tollgate.team", s.t.TeamName(o.TeamID)),
			attribute.Int64("tollgate.member_id", o.MemberID))
	}
	if o.Refusal != "" {
		attrs = append(attrs, attribute.String("tollgate.refusal", o.Refusal))
	}
	if o.Admitted {
		attrs = append(attrs, attribute.Int("tollgate.upstream_status", o.UpstreamStatus),
			attribute.Int64("tollgate.cost_micros", o.CostMicros), attribute.String("tollgate.ledger_status", string(o.LedgerStatus)))
		if o.Model != "" {
			attrs = append(attrs, attribute.String("gen_ai.request.model", o.Model))
		}
	}
	if o.UpstreamError != "" {
		attrs = append(attrs, attribute.String("tollgate.upstream_error", o.UpstreamError))
	}
	span.SetAttributes(attrs...)
}

// Transport wraps the upstream transport: each round trip, one per upstream
// attempt, gets a client span and sends its traceparent upstream.
func (t *Tracer) Transport(base http.RoundTripper) http.RoundTripper {
	return &transport{base: base, t: t}
}

type transport struct {
	base http.RoundTripper
	t    *Tracer
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := metrics.Method(req.Method)
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(req.URL.Hostname())}
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	ctx, span := tr.t.tracer.Start(req.Context(), "upstream "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
	// A RoundTripper must not modify the request it is given: the traceparent
	// goes on a copy of its headers.
	out := req.Clone(ctx)
	tr.t.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := tr.base.RoundTrip(out)
	if err != nil {
		kind := errorKind(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		span.SetStatus(codes.Error, kind)
		span.End()
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	// The span lasts as long as the response body: a stream's whole length.
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// errorKind names a transport failure without its text, which may hold a URL.
func errorKind(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, netguard.ErrForbidden):
		return "forbidden_address"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "unreachable"
}

// Limiter wraps l so that admission and settlement are child spans of the request.
func (t *Tracer) Limiter(l limiter.Limiter) limiter.Limiter { return tracedLimiter{l, t} }

type tracedLimiter struct {
	limiter.Limiter
	t *Tracer
}

func (l tracedLimiter) Admit(ctx context.Context, req limiter.Request) (limiter.Decision, error) {
	ctx, span := l.admission(ctx, req)
	defer span.End()
	d, err := l.Limiter.Admit(ctx, req)
	l.decided(span, d, err)
	return d, err
}

// AdmitAfter is one admission span; the settles it carries ride in it.
func (l tracedLimiter) AdmitAfter(ctx context.Context, ss []limiter.Settlement, req limiter.Request) (limiter.Decision, []error, error) {
	ctx, span := l.admission(ctx, req)
	defer span.End()
	span.SetAttributes(attribute.Int("tollgate.settles_carried", len(ss)))
	d, errs, err := l.Limiter.AdmitAfter(ctx, ss, req)
	l.decided(span, d, err)
	return d, errs, err
}

func (l tracedLimiter) admission(ctx context.Context, req limiter.Request) (context.Context, trace.Span) {
	return l.t.tracer.Start(ctx, "admission", trace.WithAttributes(
		attribute.Int64("tollgate.hold_micros", req.Hold), attribute.Int64("tollgate.tokens_reserved", req.Tokens)))
}

// decided records an admission's outcome on its span.
func (l tracedLimiter) decided(span trace.Span, d limiter.Decision, err error) {
	reason := string(d.Reason)
	if reason == "" {
		reason = "none"
	}
	span.SetAttributes(attribute.Bool("tollgate.admission.allowed", d.Allowed), attribute.String("tollgate.admission.reason", reason),
		attribute.Bool("tollgate.admission.degraded", d.Degraded))
	if d.Scope != "" {
		span.SetAttributes(attribute.String("tollgate.admission.scope", string(d.Scope)))
	}
	if err != nil {
		span.SetStatus(codes.Error, "admission call failed")
	}
}

func (l tracedLimiter) Settle(ctx context.Context, s limiter.Settlement) (limiter.SettleResult, error) {
	ctx, span := l.t.tracer.Start(ctx, "settle", trace.WithAttributes(attribute.Int64("tollgate.cost_micros", s.Cost)))
	defer span.End()
	r, err := l.Limiter.Settle(ctx, s)
	if err != nil {
		span.SetStatus(codes.Error, "settle call failed")
	}
	return r, err
}
