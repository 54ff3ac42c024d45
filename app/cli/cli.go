// Package cli is the tollgate command: serve, dev, migrate, admin and version.
// Every admin verb calls the same store functions the console calls.
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/config"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/migrations"
)

// Env is what a command runs with: arguments aside, all its inputs and outputs,
// so tests run commands in parallel without touching the process.
type Env struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
	// Listen opens the public listener; tests pass one on a free port.
	Listen func(addr string) (net.Listener, error)
	// Ready, when set, is called once the server accepts requests.
	Ready func(publicURL string)
}

// UsageError is a mistake in the command line; main exits 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &UsageError{msg: fmt.Sprintf(format, args...)} }

const usage = `usage: tollgate <command>
  serve              run the gateway (applies migrations first);
                     serve --check-config [--connect] validates the environment and exits
  dev                run the gateway with a ready-to-use local team (make run)
  migrate            create the database if missing and apply migrations
  admin <verb> ...   manage teams, members, routes and keys (tollgate admin help)
  version            print the version`

// Run executes one command line (args without the program name).
func Run(ctx context.Context, args []string, env Env) error {
	if env.Listen == nil {
		env.Listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	if len(args) == 0 {
		return usagef("missing command; run tollgate help")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], env)
	case "dev":
		return dev(ctx, args[1:], env)
	case "migrate":
		return migrate(ctx, env)
	case "admin":
		return admin(ctx, args[1:], env)
	case "version":
		fmt.Fprintln(env.Stdout, "tollgate", version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(env.Stdout, usage)
		return nil
	}
	return usagef("unknown command %q; run tollgate help", args[0])
}

// version is the module version and the commit the binary was built from, as
// the go command stamped them: "(devel)" alone says nothing about which
// source a `go run` or `go build` in a checkout compiled.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	return describeBuild(info)
}

func describeBuild(info *debug.BuildInfo) string {
	v := cmp.Or(info.Main.Version, "(devel)")
	var commit, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if commit == "" {
		return v + " (no VCS commit stamped)"
	}
	return v + " commit " + commit + dirty
}

// loadConfig reads the environment; its error lists every bad variable, one per line.
func loadConfig(env Env) (config.Config, error) {
	cfg, err := config.Load(env.Getenv)
	if err != nil {
		return cfg, fmt.Errorf("configuration:\n%w", err)
	}
	return cfg, nil
}

// newLogger is the process's JSON logger; go-redis's own log goes through it
// too (at debug level), not as raw lines on stderr.
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: durationsAsText}))
	redis.SetLogger(app.RedisLogger{Log: log})
	return log
}

// durationsAsText writes a time.Duration as "30s" rather than the JSON
// handler's nanosecond integer (30000000000), which a person misreads.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func serve(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("serve")
	check := fs.Bool("check-config", false, "validate the configuration, print every problem and exit (1 if any)")
	connect := fs.Bool("connect", false, "with --check-config: also reach Postgres and Redis")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *connect && !*check {
		return usagef("serve: --connect goes with --check-config")
	}
	if *check {
		return checkConfig(ctx, env, *connect)
	}
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	a, err := app.New(ctx, cfg, env.Getenv, log)
	if err != nil {
		return postgresUnreachable(err, cfg)
	}
	defer a.Close()
	link, err := firstRunSetupLink(ctx, a.Store, cfg.PublicURL)
	if err != nil {
		return err
	}
	if link != "" {
		fmt.Fprintf(env.Stdout, "This gateway has no owner yet. Open this one-time link (valid 24h, until an owner exists) to create the first team and its owner:\n  %s\nA fresh one: tollgate admin setup-link\n", link)
	}
	return listenAndServe(ctx, a, cfg, env, log, true)
}

// listenAndServe opens the public and admin listeners and serves until ctx
// ends. An admin listener that cannot open stops serve (the operator asked for
// metrics and readiness there); dev only warns, since a second local gateway
// or a test may hold 127.0.0.1:9090.
func listenAndServe(ctx context.Context, a *app.App, cfg config.Config, env Env, log *slog.Logger, adminRequired bool) error {
	ln, err := env.Listen(cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (LISTEN_ADDR): %w", cfg.ListenAddr, err)
	}
	var admin net.Listener
	if cfg.AdminAddr != "" {
		admin, err = net.Listen("tcp", cfg.AdminAddr)
		switch {
		case err != nil && adminRequired:
			ln.Close()
			return fmt.Errorf("listen on %s (ADMIN_ADDR; off disables it): %w", cfg.AdminAddr, err)
		case err != nil:
			log.Warn("admin listener not started: no /metrics or /readyz", "addr", cfg.AdminAddr, "err", err)
		default:
			log.Info("admin listener: /healthz /readyz /metrics /debug/pprof/", "addr", admin.Addr().String())
		}
	}
	log.Info("tollgate serving", "addr", ln.Addr().String(), "public_url", cfg.PublicURL)
	if env.Ready != nil {
		env.Ready("http://" + ln.Addr().String())
	}
	return a.Serve(ctx, ln, admin)
}

func migrate(ctx context.Context, env Env) error {
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	v, err := migrations.Version(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "database is at migration %d\n", v)
	return nil
}

// openPool creates the database if needed and brings its schema up to date, so
// every command works on a fresh machine.
func openPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	if err := migrations.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return nil, postgresUnreachable(err, cfg)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("database (DATABASE_URL): %w", err)
	}
	if err := migrations.Apply(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usagef("%s: flags:%s", fs.Name(), flagList(fs))
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	// As the store refuses such bytes in a name, and the API and console in
	// any field: here before a lookup hands them to Postgres, which answers
	// with an error of its own.
	var notUTF8 string
	fs.Visit(func(f *flag.Flag) {
		if notUTF8 == "" && !utf8.ValidString(f.Value.String()) {
			notUTF8 = f.Name
		}
	})
	if notUTF8 != "" {
		return usagef("%s: --%s is not valid UTF-8", fs.Name(), notUTF8)
	}
	return nil
}

func flagList(fs *flag.FlagSet) string {
	var s string
	fs.VisitAll(func(f *flag.Flag) { s += fmt.Sprintf("\n  --%s\t%s", f.Name, f.Usage) })
	return s
}

// Main runs the command line of the real process and returns its exit code.
func Main(ctx context.Context) int {
	err := Run(ctx, os.Args[1:], Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr})
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "tollgate:", terminalSafe(describe(err)))
	if _, ok := errors.AsType[*UsageError](err); ok {
		return 2
	}
	return 1
}

// describe turns store errors into the one line a person needs.
func describe(err error) string {
	if v, ok := errors.AsType[*store.ValidationError](err); ok {
		return v.Message
	}
	if s, ok := errors.AsType[*store.StateError](err); ok {
		return s.Message
	}
	return err.Error()
}
