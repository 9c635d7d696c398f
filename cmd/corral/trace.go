package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"corral/internal/app"
	"corral/internal/trace"
)

// traceCommand runs `corral trace verify`: exit 0 and "ok: N events in M
// runs" when every chain holds, exit 1 naming the first broken event.
func traceCommand(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	if len(args) == 0 || args[0] != "verify" {
		return 2, fmt.Errorf("%w: corral trace verify [--data DIR]", errUsage)
	}
	fs := flag.NewFlagSet("trace verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data directory")
	dbURL := fs.String("db", "", "the postgres:// URL control serves from, if not SQLite in --data (env CORRAL_DATABASE_URL)")
	if _, err := parseWithEnv(fs, args[1:], getenv, "data", "db"); err != nil {
		return 2, err
	}
	dir, err := absData(*data)
	if err != nil {
		return 2, err
	}
	// Verifying reads what is there: it neither creates nor migrates.
	db, err := app.OpenExistingStore(ctx, dir, *dbURL)
	if err != nil {
		return 1, err
	}
	defer db.Close()
	events, runs, err := trace.VerifyStore(ctx, db, db)
	if err != nil {
		fmt.Fprintf(stdout, "broken after %d good events in %d runs: %v\n", events, runs, err)
		return 1, nil
	}
	fmt.Fprintf(stdout, "ok: %d events in %d runs\n", events, runs)
	return 0, nil
}
