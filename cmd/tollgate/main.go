// Command tollgate is the gateway: serve | dev | migrate | admin <verb> | version.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/app/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx)
	stop()
	os.Exit(code)
}
