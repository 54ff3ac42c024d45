package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/app/cli"
)

// profiledServe is `tollgate serve` (the same code, through app/cli) with
// net/http/pprof on a side listener. The overhead scenario profiles it when the
// gateway's own admin listener does not serve /debug/pprof yet:
//
//	go run ./loadtest profiledserve -pprof 127.0.0.1:6060   (environment as for tollgate serve)
func profiledServe(args []string) error {
	fs := flag.NewFlagSet("profiledserve", flag.ExitOnError)
	addr := fs.String("pprof", "127.0.0.1:6060", "listen address of /debug/pprof")
	_ = fs.Parse(args) // ExitOnError
	if err := servePprof(*addr); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Run(ctx, []string{"serve"}, cli.Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
}

// servePprof serves net/http/pprof on a listener of its own at addr.
func servePprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			fmt.Fprintln(os.Stderr, "pprof listener:", err)
		}
	}()
	return nil
}
