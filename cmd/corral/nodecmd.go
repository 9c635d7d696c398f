package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"corral/internal/app"
	"corral/internal/service"
)

// nodeCommand is `corral node token`: on the machine that holds control's
// data directory, it makes a one-time join token for a sandbox node, good
// for an hour, and prints it (stdout only: it is a secret until used).
func nodeCommand(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "token" {
		return fmt.Errorf("%w: corral node token [--data DIR] [--db URL]", errUsage)
	}
	fs := flag.NewFlagSet("node token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "control's data directory")
	dbURL := fs.String("db", "", "the postgres:// URL control serves from, if not SQLite in --data (env CORRAL_DATABASE_URL)")
	if _, err := parseWithEnv(fs, args[1:], getenv, "data", "db"); err != nil {
		return err
	}
	dir, err := absData(*data)
	if err != nil {
		return err
	}
	// Only control's existing database: a token written into a new, empty
	// one (a mistyped --data) would be one control never accepts.
	db, err := app.OpenExistingStore(ctx, dir, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	token, expires, err := service.NewEnrollment(db, service.NodesConfig{}).JoinToken(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "corral: a one-time join token for a sandbox node, good until %s:\n"+
		"  corral serve --role sandbox --control URL --join TOKEN --data DIR\n", expires.UTC().Format(time.RFC3339))
	return nil
}
