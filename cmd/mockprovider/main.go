// Command mockprovider runs the fake Anthropic/OpenAI upstream from package mock, for demos
// and load tests. Tests use the package directly with httptest.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mockprovider:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mockprovider", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9999", "listen address")
	var opts mock.Options
	fs.StringVar(&opts.AnthropicKey, "anthropic-key", "", "x-api-key required on Anthropic endpoints (empty accepts any)")
	fs.StringVar(&opts.OpenAIKey, "openai-key", "", "bearer token required on OpenAI endpoints (empty accepts any)")
	fs.DurationVar(&opts.Latency, "latency", 0, "wait before response headers")
	fs.DurationVar(&opts.EventInterval, "event-interval", 0, "wait between SSE events")
	fs.IntVar(&opts.OutputTokens, "output-tokens", 16, "completion length in tokens when the request doesn't cap it lower")
	fs.IntVar(&opts.RequestsPerMinute, "rpm", 0, "the account's requests per minute: rate-limit headers on every answer, 429 past it (0: no limit)")
	fs.IntVar(&opts.TokensPerMinute, "tpm", 0, "the account's tokens per minute (input plus capped output), likewise")
	logPath := fs.String("log", "", "append one JSON usage record per request to this file")
	records := fs.Bool("records", true, "keep every request's record in memory for GET /_mock/records (false for long load tests)")
	_ = fs.Parse(args) // ExitOnError
	opts.NoRecords = !*records

	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.LogWriter = f
	}

	// Listen before printing so the line names the real address, even for port 0.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mock.New(opts), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("mockprovider listening on http://%s\n", ln.Addr())

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
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
