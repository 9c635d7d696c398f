package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"corral/internal/app"
	"corral/internal/store"
	"corral/internal/trace"
)

// storeCommand runs `corral store copy --from DIR --to URL`: the SQLite
// store of a stopped control, moved into an empty PostgreSQL database,
// whose traces are then verified and whose counts are compared with the
// source's. Exit 0 when both hold, 1 when the copy or a check failed.
func storeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	const use = "corral store copy --from DIR --to postgres://…"
	if len(args) == 0 || args[0] != "copy" {
		return 2, fmt.Errorf("%w: %s", errUsage, use)
	}
	fs := flag.NewFlagSet("store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the data directory of the control whose SQLite store is copied (sqlite:DIR or DIR)")
	to := fs.String("to", "", "the PostgreSQL database to copy into, empty (a password is better in PGPASSWORD or ~/.pgpass than in the URL)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *from == "" || *to == "" {
		return 2, fmt.Errorf("%w: %s", errUsage, use)
	}
	if !store.IsPostgresURL(*to) {
		return 2, fmt.Errorf("%w: --to must be a postgres:// URL", errUsage)
	}
	dir, err := absData(strings.TrimPrefix(*from, "sqlite:"))
	if err != nil {
		return 2, err
	}
	// The source's server must not write while it is read: its lock.
	release, err := app.LockData(dir)
	if err != nil {
		return 1, err
	}
	defer release()
	src, err := app.OpenExistingStore(ctx, dir, "")
	if err != nil {
		return 1, err
	}
	defer src.Close()
	dst, err := store.OpenPostgres(ctx, *to)
	if err != nil {
		return 1, err
	}
	defer dst.Close()
	err = store.Copy(ctx, src, dst, func(table string, rows int64) {
		fmt.Fprintf(stderr, "corral store copy: %s: %d rows\n", table, rows)
	})
	if err != nil {
		return 1, err
	}
	want, err := src.Census(ctx)
	if err != nil {
		return 1, err
	}
	got, err := dst.Census(ctx)
	if err != nil {
		return 1, err
	}
	slices.Sort(got.AgentIDs)
	slices.Sort(want.AgentIDs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		fmt.Fprintf(stdout, "copied, but the counts differ: the source holds %+v, the copy %+v\n", want, got)
		return 1, nil
	}
	events, runs, err := trace.VerifyStore(ctx, dst, dst)
	if err != nil {
		fmt.Fprintf(stdout, "copied, but a trace does not verify on the copy, after %d good events in %d runs: %v\n", events, runs, err)
		return 1, nil
	}
	fmt.Fprintf(stdout, "ok: %d users, %d agents, %d runs, %d change sets, %d messages; %d trace events in %d runs verified\n",
		got.Users, got.Agents, got.Runs, got.ChangeSets, got.Messages, events, runs)
	fmt.Fprintf(stdout, "serve from it with --db (or CORRAL_DATABASE_URL), keeping --data %s for its keys and documents\n", dir)
	return 0, nil
}
