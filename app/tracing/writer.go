package tracing

import (
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// statusWriter remembers the status written. Unwrap lets http.ResponseController
// reach the real writer, for the gateway's flushes and full duplex.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() { http.NewResponseController(s.ResponseWriter).Flush() }

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// spanBody ends the upstream span when the response body is read to its end
// or closed, whichever comes first.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

func (b *spanBody) end() { b.once.Do(func() { b.span.End() }) }
