package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/sso"
	"github.com/tollgate/tollgate/app/store"
)

// ssoCheckTimeout bounds each provider `serve --check-config --connect` tries.
const ssoCheckTimeout = 5 * time.Second

// CheckSSO tries every team's enabled single sign-on method as the console's
// settings page does, for `serve --check-config --connect`: a line for each
// that works, a problem naming the team, the method and the secret's variable
// for each that does not. A database not yet created or migrated has none.
func CheckSSO(ctx context.Context, cfg config.Config, getenv func(string) string) ([]string, []error) {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, nil // checkPostgres has said what is wrong with it
	}
	defer pool.Close()
	methods, err := store.New(pool).EnabledSSOMethods(ctx)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && (pgErr.Code == "42P01" || pgErr.Code == "3D000") {
		return nil, nil // undefined table or database: serve migrates before any team exists
	}
	if err != nil {
		return nil, []error{fmt.Errorf("single sign-on: the teams' methods could not be read: %w", err)}
	}
	client := sso.New(sso.Options{Timeout: ssoCheckTimeout, Outbound: OutboundGuard(cfg)})
	var lines []string
	var problems []error
	for _, m := range methods {
		env := store.SSOSecretEnv(m.TeamName, m.Kind)
		what := fmt.Sprintf("team %s's %s sign-in", m.TeamName, m.Kind)
		if m.Kind == store.SignInOIDC {
			what += " (" + m.IssuerURL + ")"
		}
		c := console.SSOConfig(cfg.PublicURL, getenv, m)
		if c.ClientSecret == "" {
			problems = append(problems, fmt.Errorf("%s: not set; %s fails until it is", env, what))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, ssoCheckTimeout)
		err := client.Probe(pctx, c)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %s: %w", env, what, err))
			continue
		}
		lines = append(lines, fmt.Sprintf("  sso       %s answers and accepts its client", what))
	}
	return lines, problems
}
