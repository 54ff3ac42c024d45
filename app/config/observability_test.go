package config_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/config"
)

func TestLoadObservability(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		vars map[string]string
		want func(config.Config) bool
	}{
		{"admin off", map[string]string{"ADMIN_ADDR": "off"}, func(c config.Config) bool { return c.AdminAddr == "" }},
		{"admin in a container", map[string]string{"ADMIN_ADDR": "0.0.0.0:9090"}, func(c config.Config) bool { return c.AdminAddr == "0.0.0.0:9090" }},
		{"no drain delay", map[string]string{"DRAIN_DELAY": "0s"}, func(c config.Config) bool { return c.DrainDelay == 0 }},
		{"sampled logs", map[string]string{"LOG_SAMPLE_EVERY": "100"}, func(c config.Config) bool { return c.LogSampleEvery == 100 }},
		{"tracing off by default", nil, func(c config.Config) bool { return !c.Tracing.Enabled() }},
		{"base endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			func(c config.Config) bool { return c.Tracing.Endpoint == "http://collector:4318/v1/traces" }},
		{"traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp/traces"},
			func(c config.Config) bool { return c.Tracing.Endpoint == "https://b/otlp/traces" }},
		{"otlp exporter, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			func(c config.Config) bool { return c.Tracing.Endpoint == "http://localhost:4318/v1/traces" }},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"},
			func(c config.Config) bool { return !c.Tracing.Enabled() }},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"},
			func(c config.Config) bool { return !c.Tracing.Enabled() }},
		{"service name", map[string]string{"OTEL_SERVICE_NAME": "gw-eu"}, func(c config.Config) bool { return c.Tracing.ServiceName == "gw-eu" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(env(tt.vars))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tt.want(c) {
				t.Errorf("Load(%v) = %+v", tt.vars, c)
			}
		})
	}
}

func TestLoadObservabilityBadValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, value, want string }{
		{"ADMIN_ADDR", "9090", `ADMIN_ADDR must be host:port or :port with a port from 1 to 65535, or off, not "9090"`},
		{"ADMIN_ADDR", "127.0.0.1:8080", "ADMIN_ADDR must differ from the public listener 127.0.0.1:8080: metrics and pprof are not for tenants"},
		{"DRAIN_DELAY", "-1s", `DRAIN_DELAY must be a duration such as 30s or 5m, at least 0s, not "-1s"`},
		{"LOG_SAMPLE_EVERY", "0", `LOG_SAMPLE_EVERY must be a whole number of at least 1, not "0"`},
		{"OTEL_TRACES_EXPORTER", "zipkin", `OTEL_TRACES_EXPORTER must be otlp or none, not "zipkin"`},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", `OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf, not "grpc": tollgate exports OTLP over HTTP`},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL such as http://collector:4318"},
		{"OTEL_SDK_DISABLED", "maybe", `OTEL_SDK_DISABLED must be true or false, not "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			got := problems(t, loadErr(map[string]string{tt.name: tt.value}))
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems = %q\nwant [%q]", got, tt.want)
			}
		})
	}
	// An endpoint's credentials never reach the message.
	err := loadErr(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://user:s3cret@collector"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Load = %v, want an error without the password", err)
	}
}
