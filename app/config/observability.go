package config

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// Tracing says where the gateway exports its spans. The variables are the
// OpenTelemetry standard ones, read here rather than by the SDK so that they
// are validated with the rest of the configuration; the exporter still reads
// the OTEL_EXPORTER_OTLP_* variables this does not cover (headers, timeout,
// compression, certificates) from the process environment.
type Tracing struct {
	// Endpoint is the full OTLP/HTTP URL spans are posted to, "" when tracing is
	// off. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else
	// OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces; OTEL_TRACES_EXPORTER=otlp
	// with neither set sends to http://localhost:4318/v1/traces; default none:
	// tracing is off unless one of these is set.
	Endpoint string
	// ServiceName names this service on every span. OTEL_SERVICE_NAME, default tollgate.
	ServiceName string
}

// Enabled reports whether spans are exported.
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

func (p *parser) loadObservability(c *Config) {
	c.AdminAddr = p.str("ADMIN_ADDR", "127.0.0.1:9090")
	if strings.EqualFold(c.AdminAddr, "off") {
		c.AdminAddr = ""
	} else if _, port, err := net.SplitHostPort(c.AdminAddr); err != nil || !(validPort(port) || port == "0") {
		// Port 0 (any free port, logged at start) is for tests.
		p.fail("ADMIN_ADDR", "must be host:port or :port with a port from 1 to 65535, or off, not %q", c.AdminAddr)
	} else if c.AdminAddr == c.ListenAddr {
		p.fail("ADMIN_ADDR", "must differ from the public listener %s: metrics and pprof are not for tenants", c.ListenAddr)
	}
	var hosts []string
	for h := range strings.SplitSeq(p.str("ADMIN_HOSTS", ""), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
			continue
		}
		if strings.ContainsAny(h, ":/[]@ ") {
			p.fail("ADMIN_HOSTS", "must be comma-separated host names without scheme or port, such as metrics.internal, not %q", h)
			continue
		}
		hosts = append(hosts, strings.TrimSuffix(h, "."))
	}
	c.AdminHosts = strings.Join(hosts, ",")
	c.ClientIPHeader = p.str("CLIENT_IP_HEADER", "")
	if c.ClientIPHeader != "" && !validHeaderName(c.ClientIPHeader) {
		p.fail("CLIENT_IP_HEADER", "must be a header name such as Fly-Client-IP or X-Forwarded-For, not %q", c.ClientIPHeader)
	}
	c.DrainDelay = p.duration("DRAIN_DELAY", 5*time.Second, 0)
	c.LogSampleEvery = int(p.int64("LOG_SAMPLE_EVERY", 1, 1))
	c.Tracing = p.tracing()
}

// validHeaderName reports whether s is an HTTP header name (RFC 9110 token).
func validHeaderName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// tracing reads the OTEL_* variables: tracing is on when an OTLP endpoint is
// set or OTEL_TRACES_EXPORTER=otlp, and off when nothing is set, so an
// unconfigured gateway pays nothing for it.
func (p *parser) tracing() Tracing {
	t := Tracing{ServiceName: p.str("OTEL_SERVICE_NAME", "tollgate")}
	exporter := strings.ToLower(p.str("OTEL_TRACES_EXPORTER", ""))
	disabled := p.bool("OTEL_SDK_DISABLED", false)
	p.httpProtobuf("OTEL_EXPORTER_OTLP_PROTOCOL", p.str("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
	p.httpProtobuf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", p.str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"))
	traces := p.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	base := p.str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	switch exporter {
	case "", "otlp":
	case "none":
		return t
	default:
		p.fail("OTEL_TRACES_EXPORTER", "must be otlp or none, not %q", exporter)
		return t
	}
	switch {
	case disabled:
		return t
	case traces != "":
		t.Endpoint = p.otlpURL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces)
	case base != "":
		if u := p.otlpURL("OTEL_EXPORTER_OTLP_ENDPOINT", base); u != "" {
			t.Endpoint = strings.TrimSuffix(u, "/") + "/v1/traces"
		}
	case exporter == "otlp":
		t.Endpoint = "http://localhost:4318/v1/traces"
	}
	return t
}

func (p *parser) httpProtobuf(name, v string) {
	if v != "http/protobuf" {
		p.fail(name, "must be http/protobuf, not %q: tollgate exports OTLP over HTTP", v)
	}
}

// otlpURL checks an OTLP endpoint; its message does not repeat the URL, which
// may carry credentials.
func (p *parser) otlpURL(name, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(name, "must be an http:// or https:// URL such as http://collector:4318")
		return ""
	}
	return raw
}
