package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/app/tracing"
	"github.com/tollgate/tollgate/proxy"
)

// TestServerAndClientSpans: a request through Middleware continues the
// caller's trace; a call through Transport is its child and carries a
// traceparent naming it, on a copy of the request.
func TestServerAndClientSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	var seen string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("traceparent")
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	var out *http.Request
	h := tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ = http.NewRequestWithContext(r.Context(), http.MethodPost, upstream.URL+"/v1/messages?key=tg_secret", strings.NewReader("{}"))
		resp, err := client.Do(out)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(http.StatusAccepted)
	}))
	req := httptest.NewRequest(http.MethodPost, "/anthropic/v1/messages?key=tg_secret", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), req)

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	client0, server := spans[0], spans[1]
	if server.SpanKind() != trace.SpanKindServer || server.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span %v parent %v", server.SpanKind(), server.Parent().SpanID())
	}
	if client0.SpanKind() != trace.SpanKindClient || client0.Parent().SpanID() != server.SpanContext().SpanID() || client0.Name() != "upstream POST" {
		t.Errorf("client span %s kind %v parent %v", client0.Name(), client0.SpanKind(), client0.Parent().SpanID())
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + client0.SpanContext().SpanID().String() + "-01"; seen != want {
		t.Errorf("upstream saw traceparent %q, want %q", seen, want)
	}
	if out.Header.Get("traceparent") != "" {
		t.Error("Transport changed the caller's request")
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "tg_secret") || strings.Contains(kv.Value.Emit(), "/v1/messages") {
				t.Errorf("span %s attribute %s = %s: request data on a span", s.Name(), kv.Key, kv.Value.Emit())
			}
		}
	}
}

func TestObserverNamesTheServerSpanByRoute(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	tr.TeamName = func(int64) string { return "acme" }
	ctx, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(context.Background(), "POST")
	tr.Observer().Finished(proxy.Outcome{Ctx: ctx, Method: "POST", RoutePrefix: "/openai", TeamID: 1, MemberID: 2, Refusal: "budget", RequestID: "req_1"})
	span.End()
	s := rec.Ended()[0]
	got := map[string]string{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	if s.Name() != "POST /openai" || got["tollgate.team"] != "acme" || got["tollgate.refusal"] != "budget" || got["http.route"] != "/openai" {
		t.Errorf("span %s %v", s.Name(), got)
	}
}
