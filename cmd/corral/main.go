// Command corral is the one Corral binary: the server in each of its roles
// and the administration commands. Flags and environment variables are read
// here and nowhere else; everything below takes a config struct.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"corral"
	"corral/internal/app"
	"corral/internal/auth"
	"corral/internal/service"
)

const usage = `usage:
  corral serve [--addr 127.0.0.1:8080] [--data ./data] [--db postgres://… [--failover-after 15s] [--advertise URL]] [--role all|control|sandbox] [--signup open|invite|closed]
               [--change-ttl 168h] [--quarantine-after 3] [--quarantine-window 1h] [--session-grace 10m]
               [--max-conns N] [--max-conns-per-addr 128] [--trusted-proxy CIDR]...
  corral exec --workspace DIR [--fs read-only|read-write] [--memory BYTES] [--pids N] [--cpu MILLIS]
              [--timeout DUR] [--output BYTES] [--tmp BYTES] [--env K=V]... [--json] -- CMD [ARGS...]
  corral trace verify [--data DIR] [--db URL]
  corral backup --to FILE [--data DIR]               (a .tar or .tar.gz; while the server runs)
  corral restore --from FILE [--data DIR]            (into an absent or empty DIR)
  corral user create --email E --name N [--admin]   (reads the password from stdin; --data DIR, --db URL)
  corral user disable --email E
  corral user enable --email E
  corral node token [--data DIR] [--db URL]          (a one-time join token for a sandbox node)
  corral store copy --from DIR --to postgres://…     (moves a SQLite installation to PostgreSQL)
  corral version
`

func main() {
	maybeInit() // first: a sandbox's init must not run anything else
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr, getenv)
	case "user":
		err = user(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "node":
		err = nodeCommand(ctx, args[1:], stdout, stderr, getenv)
	case "trace":
		code, err := traceCommand(ctx, args[1:], stdout, stderr, getenv)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "corral trace: %s\n", describe(err))
		}
		return code
	case "backup":
		code, err := backupCommand(ctx, args[1:], stdout, stderr, getenv)
		return commandExit(stderr, "backup", code, err)
	case "restore":
		code, err := restoreCommand(ctx, args[1:], stdout, stderr, getenv)
		return commandExit(stderr, "restore", code, err)
	case "store":
		code, err := storeCommand(ctx, args[1:], stdout, stderr)
		return commandExit(stderr, "store", code, err)
	case "exec":
		code, err := execCommand(ctx, args[1:], stdin, stdout, stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "corral exec: %s\n", describe(err))
		}
		return code
	case "version", "--version":
		fmt.Fprintln(stdout, "corral", app.Version())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "corral: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "corral: %s\n", describe(err))
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// errUsage marks a command line that does not hold together: exit
// status 2. A server Config that does not is one too.
var errUsage = app.ErrConfig

// describe shows a user-facing message, and the internal cause too: the
// command line's reader is the operator, who needs it.
func describe(err error) string {
	var e *corral.Error
	if errors.As(err, &e) && e.Code != corral.EINTERNAL {
		return e.Message
	}
	return err.Error()
}

func newLogger(w io.Writer, getenv func(string) string) *slog.Logger {
	level := slog.LevelInfo
	if strings.EqualFold(getenv("CORRAL_LOG_LEVEL"), "debug") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func user(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: corral user create|disable|enable", errUsage)
	}
	fs := flag.NewFlagSet("user "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data directory")
	dbURL := fs.String("db", "", "the postgres:// URL control serves from, if not SQLite in --data (env CORRAL_DATABASE_URL)")
	email := fs.String("email", "", "the account's email")
	name := fs.String("name", "", "the account's display name (create)")
	admin := fs.Bool("admin", false, "make the account an administrator (create)")
	if _, err := parseWithEnv(fs, args[1:], getenv, "data", "db"); err != nil {
		return err
	}
	dir, err := absData(*data)
	if err != nil {
		return err
	}
	// create may make the first admin of a new installation before its
	// first serve (signup invite or closed); the others change an account
	// that must already be there.
	open := app.OpenExistingStore
	if args[0] == "create" {
		open = app.OpenStore
	}
	db, err := open(ctx, dir, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	log := newLogger(stderr, getenv)
	accounts, err := service.NewAccounts(db, auth.DefaultParams, service.Config{Log: log})
	if err != nil {
		return err
	}
	var u corral.User
	switch args[0] {
	case "create":
		password, err := readPassword(stdin)
		if err != nil {
			return err
		}
		u, err = accounts.CreateUser(ctx, *email, *name, password, *admin)
		if err != nil {
			return err
		}
	case "disable", "enable":
		u, err = accounts.SetDisabledByEmail(ctx, *email, args[0] == "disable")
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown user command %q", errUsage, args[0])
	}
	fmt.Fprintf(stdout, "%s %s <%s> admin=%v disabled=%v\n", u.ID, u.Name, u.Email, u.Admin, u.Disabled)
	return nil
}

// readPassword reads the first line of stdin: a password never goes on the
// command line, where ps and shell history would show it.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", corral.Errorf(corral.EINVALID, "give the password on stdin, for example: printf '%%s\\n' \"$PASSWORD\" | corral user create ...")
	}
	return line, nil
}

// absData resolves a --data once, at start: every path below it is handed
// to child processes (a session's supervisor starts in "/"), where a
// relative one would name a place under the host's root.
func absData(data string) (string, error) {
	if data == "" {
		return "", fmt.Errorf("%w: --data must name a directory", errUsage)
	}
	abs, err := filepath.Abs(data)
	if err != nil {
		return "", fmt.Errorf("%w: --data: %v", errUsage, err)
	}
	return abs, nil
}
