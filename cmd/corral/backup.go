package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"corral/internal/app"
	"corral/internal/backup"
)

// backupCommand runs `corral backup --data DIR --to FILE`: a consistent
// copy of a control's data directory while its server serves, and what it
// holds. Exit 1 when it fails (no FILE is left) or when the traces in it
// do not verify (FILE is written: it is the best copy there is).
func backupCommand(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "the data directory of the control to back up")
	to := fs.String("to", "", "the backup file to write (a .tar, or a .tar.gz)")
	if _, err := parseWithEnv(fs, args, getenv, "data"); err != nil {
		return 2, err
	}
	if *to == "" {
		return 2, fmt.Errorf("%w: corral backup --data DIR --to FILE", errUsage)
	}
	// A store in PostgreSQL is the database's to back up: this command
	// copies a SQLite file, and would find none.
	if getenv("CORRAL_DATABASE_URL") != "" {
		return 2, fmt.Errorf("%w: the store is in PostgreSQL (CORRAL_DATABASE_URL): back it up with pg_dump; corral backup copies a SQLite store and its data directory", errUsage)
	}
	dir, err := absData(*data)
	if err != nil {
		return 2, err
	}
	file, err := filepath.Abs(*to)
	if err != nil {
		return 2, fmt.Errorf("%w: --to: %v", errUsage, err)
	}
	lowerPriority()
	m, err := backup.Take(ctx, backup.Options{Data: dir, To: file, CorralVersion: app.Version(),
		Progress: prefixed{stderr, "corral backup: "}})
	if err != nil {
		return 1, err
	}
	h := m.Holds
	fmt.Fprintf(stdout, "backup %s: %s, taken %s by corral %s (schema %d)\n", file, backup.Size(m.Bytes),
		m.CreatedAt.Format(time.RFC3339), m.CorralVersion, m.Schema)
	fmt.Fprintf(stdout, "  database: %d users, %d agents, %d runs (%d in progress), %d change sets (%d pending), %d messages\n",
		h.Users, h.Agents, h.Runs, h.RunsInProgress, h.ChangeSets, h.PendingChangeSets, h.Messages)
	fmt.Fprintf(stdout, "  documents: %d in %d stores\n", h.Documents, h.DocumentStores)
	printWorkspaces(stdout, h)
	if h.CACert {
		fmt.Fprintln(stdout, "  the egress CA's certificate (egress-ca.pem)")
	}
	fmt.Fprintf(stdout, "  not in it: secret.key and egress-ca.key (keep them apart from backups; %d stored credentials and secrets need secret.key); staged trees, sessions, journals\n", h.Sealed)
	if m.Traces.Broken != "" {
		fmt.Fprintf(stdout, "  traces: BROKEN after %d good events in %d chains: %s\n", m.Traces.Events, m.Traces.Chains, m.Traces.Broken)
		return 1, fmt.Errorf("the backup is written, but the traces in it do not verify (corral restore will say so too): %s", m.Traces.Broken)
	}
	fmt.Fprintf(stdout, "  traces: ok: %d events in %d chains\n", m.Traces.Events, m.Traces.Chains)
	return 0, nil
}

// restoreCommand runs `corral restore --from FILE --data DIR`: DIR must be
// absent or empty. Exit 1 when the backup is refused (nothing is written)
// or when a trace chain in it is broken (what was written stays, for a
// person to look at: it is not to be served).
func restoreCommand(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup file to restore")
	data := fs.String("data", "./data", "the data directory to restore into: absent or empty")
	if _, err := parseWithEnv(fs, args, getenv, "data"); err != nil {
		return 2, err
	}
	if *from == "" {
		return 2, fmt.Errorf("%w: corral restore --from FILE --data DIR", errUsage)
	}
	dir, err := absData(*data)
	if err != nil {
		return 2, err
	}
	r, err := backup.Restore(ctx, backup.RestoreOptions{From: *from, Data: dir, Lock: app.LockData, LockFile: app.LockFile,
		Progress: prefixed{stderr, "corral restore: "}})
	if err != nil {
		return 1, err
	}
	m, c := r.Manifest, r.Census
	fmt.Fprintf(stdout, "restored %s into %s: taken %s by corral %s (schema %d, now %d)\n", *from, dir,
		m.CreatedAt.Format(time.RFC3339), m.CorralVersion, m.Schema, r.Schema)
	fmt.Fprintf(stdout, "  database: %d users, %d agents, %d runs, %d change sets, %d messages\n",
		c.Users, c.Agents, c.Runs, c.ChangeSets, c.Messages)
	if r.Expired > 0 {
		fmt.Fprintf(stdout, "  %d change sets pending when backed up are now expired: staged trees are never in a backup\n", r.Expired)
	}
	if c.RunsInProgress > 0 {
		fmt.Fprintf(stdout, "  %d runs in progress when backed up: corral serve reconciles them when it starts\n", c.RunsInProgress)
	}
	fmt.Fprintf(stdout, "  documents: %d in %d stores\n", r.Documents, r.DocumentStores)
	printWorkspaces(stdout, m.Holds)
	if r.Traces.Broken != "" {
		fmt.Fprintf(stdout, "  traces: BROKEN after %d good events in %d chains: %s\n", r.Traces.Events, r.Traces.Chains, r.Traces.Broken)
		return 1, fmt.Errorf("a trace chain in the backup is broken: %s; %s holds what was restored, to look at: do not serve it", r.Traces.Broken, dir)
	}
	fmt.Fprintf(stdout, "  traces: ok: %d events in %d chains\n", r.Traces.Events, r.Traces.Chains)
	fmt.Fprintln(stdout, "before corral serve:")
	fmt.Fprintf(stdout, "  copy secret.key to %s (mode 0600), or set CORRAL_SECRET_KEY: %d stored credentials and secrets need it, and a server without it makes a new key that cannot open them\n",
		filepath.Join(dir, "secret.key"), c.Sealed)
	if m.Holds.CACert {
		fmt.Fprintf(stdout, "  copy egress-ca.key to %s (mode 0600), or remove egress-ca.pem there to have a new egress CA made: the server does not start with the certificate alone\n",
			filepath.Join(dir, "egress-ca.key"))
	}
	return 0, nil
}

func printWorkspaces(w io.Writer, h backup.Holds) {
	fmt.Fprintf(w, "  workspaces: %d (%d files, %s)", h.Workspaces, h.WorkspaceFiles, backup.Size(h.WorkspaceBytes))
	if h.Skipped > 0 {
		fmt.Fprintf(w, "; %d devices, FIFOs or sockets skipped", h.Skipped)
	}
	fmt.Fprintln(w)
}

// prefixed writes each line written to it after prefix.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

// commandExit prints a command's error as run does, and gives its status.
func commandExit(stderr io.Writer, name string, code int, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "corral %s: %s\n", name, describe(err))
	}
	return code
}
