package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
)

// checkTimeout bounds each connection `serve --check-config --connect` makes.
const checkTimeout = 5 * time.Second

// checkConfig is `serve --check-config`: the environment validated exactly as
// serve validates it, every problem on its own line, nothing started. With
// connect it also reaches Postgres and Redis (read-only: it creates no
// database) and tries each team's single sign-on provider, so an operator can
// test a deploy's secrets before deploying.
func checkConfig(ctx context.Context, env Env, connect bool) error {
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "configuration ok\n  listen    %s (public URL %s)\n  redis     %s\n",
		cfg.ListenAddr, cfg.PublicURL, redisSummary(cfg))
	if !connect {
		return nil
	}
	var problems []error
	if msg, err := checkPostgres(ctx, cfg); err != nil {
		problems = append(problems, err)
	} else {
		fmt.Fprintf(env.Stdout, "  postgres  %s\n", msg)
		lines, ssoProblems := app.CheckSSO(ctx, cfg, env.Getenv)
		for _, line := range lines {
			fmt.Fprintln(env.Stdout, line)
		}
		problems = append(problems, ssoProblems...)
	}
	if cfg.RedisURL != "" {
		rctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := app.CheckRedis(rctx, cfg)
		cancel()
		if _, ok := errors.AsType[*app.RedisModeError](err); ok {
			problems = append(problems, err)
		} else if err != nil {
			problems = append(problems, fmt.Errorf("REDIS_URL: Redis does not answer: %w", err))
		} else {
			fmt.Fprintln(env.Stdout, "  redis     answers")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("connections:\n%w", errors.Join(problems...))
	}
	return nil
}

func checkPostgres(ctx context.Context, cfg config.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	pc, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return "", errors.New("DATABASE_URL: pgx cannot parse it") // its error may quote the password
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "3D000" { // invalid_catalog_name
		return fmt.Sprintf("answers; database %q does not exist yet (serve and migrate create it)", pc.Database), nil
	}
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: Postgres does not answer: %w", err)
	}
	defer conn.Close(ctx)
	transport := "without TLS"
	if _, ok := conn.PgConn().Conn().(*tls.Conn); ok {
		transport = "over TLS"
	}
	return fmt.Sprintf("answers (database %q, %s)", pc.Database, transport), nil
}

// redisSummary says which shape of Redis the configuration describes, without
// the URL's password.
func redisSummary(cfg config.Config) string {
	if cfg.RedisURL == "" {
		return "none: limits are kept per process, exact for one replica only"
	}
	e, err := config.ParseRedisURL(cfg.RedisURL)
	if err != nil {
		return "invalid"
	}
	s := fmt.Sprintf("%s, %d host(s)", cfg.RedisMode(), len(e.Addrs))
	if cfg.RedisMode() == config.RedisSentinel {
		s += fmt.Sprintf(", master %q", cfg.RedisSentinelMaster)
	}
	if e.TLS {
		s += ", TLS"
		if cfg.RedisTLSCAFile != "" {
			s += " (CA " + cfg.RedisTLSCAFile + ")"
		}
	}
	return s
}
