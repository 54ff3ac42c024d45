package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// bareProxy is the reference the gateway is measured against: the standard
// library's ReverseProxy with a Transport tuned as a production proxy would be
// (keep-alive pool sized for the load, no compression negotiation, HTTP/1.1 to
// a loopback upstream), doing only what every proxy must: strip a path prefix
// and set the upstream credential. It runs as its own process, like the
// gateway, so its CPU is measured the same way:
//
//	go run ./loadtest bareproxy -addr 127.0.0.1:8081 -upstream http://127.0.0.1:9999 -strip /anthropic
func bareProxy(args []string) error {
	fs := flag.NewFlagSet("bareproxy", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address")
	upstream := fs.String("upstream", "http://127.0.0.1:9999", "upstream base URL")
	strip := fs.String("strip", "/anthropic", "path prefix removed before forwarding")
	apiKey := fs.String("api-key", "", "X-Api-Key set on every upstream request (empty: forward the caller's)")
	pprofAddr := fs.String("pprof", "", "listen address of /debug/pprof (empty: none), for the memory scenario")
	_ = fs.Parse(args) // ExitOnError
	up, err := url.Parse(*upstream)
	if err != nil {
		return err
	}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = up.Scheme, up.Host
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, *strip)
			pr.Out.URL.RawPath = ""
			pr.Out.Host = ""
			if *apiKey != "" {
				pr.Out.Header.Set("X-Api-Key", *apiKey)
			}
		},
		// FlushInterval stays 0, as in the gateway: ReverseProxy flushes each write of
		// a text/event-stream response by itself.
	}
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Full duplex lets the upstream request keep writing the caller's body after
	// the response has begun; without it HTTP/1.1 closes the body under a
	// streamed POST and cuts the stream (golang/go#40747). The gateway does the same.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("bareproxy: shutdown: %w", err)
	}
	return nil
}
