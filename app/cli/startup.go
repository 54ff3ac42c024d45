package cli

import (
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
)

// postgresUnreachable turns a start that failed because nothing answered at
// DATABASE_URL's address into the one line a newcomer needs: where it looked,
// how to start Postgres here, and which variable points elsewhere. Other
// errors (a wrong password, a failed migration) pass through unchanged.
func postgresUnreachable(err error, cfg config.Config) error {
	var connErr *pgconn.ConnectError
	var netErr *net.OpError
	if !errors.As(err, &connErr) || !errors.As(err, &netErr) {
		return err
	}
	addr := "DATABASE_URL's host"
	if pc, perr := pgx.ParseConfig(cfg.DatabaseURL); perr == nil {
		addr = net.JoinHostPort(pc.Host, fmt.Sprint(pc.Port))
	}
	return fmt.Errorf("Postgres is not answering at %s (%v): start it (%s) or set DATABASE_URL to one that runs",
		addr, netErr.Err, app.StartHint("postgres"))
}
