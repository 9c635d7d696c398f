// Package backup copies a control's data directory into one archive while
// its server serves and its runs go on, and restores such an archive into
// an empty directory.
//
// A backup never takes the server's lock and never writes the data
// directory. The databases (corral.db and every agent's document store)
// are copied with SQLite's VACUUM INTO, a snapshot as of one transaction
// however the server writes meanwhile. Each agent's workspace is copied
// between two looks at its apply journal, and copied again when an apply
// ran in between, so no apply is caught halfway. The archive is a tar
// (gzip when its name ends in .gz or .tgz) whose last entry, manifest.json,
// lists every entry with its size and SHA-256: a restore reads the whole
// archive against it before it writes anything.
//
// The keys are never in a backup: secret.key (which opens the stored
// credentials and secrets) and egress-ca.key are kept apart by the
// operator, so that a backup file that leaks opens nothing.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral"
	"corral/internal/store"
)

// The archive's format, in its manifest.
const (
	Format        = "corral-backup"
	FormatVersion = 1
)

// What a backup holds, by its path in the data directory, which is its
// name in the archive too.
const (
	dbFile        = "corral.db"
	caCertFile    = "egress-ca.pem"
	documentsDir  = "documents"
	workspacesDir = "workspaces"
	journalsDir   = "journals"
	manifestName  = "manifest.json"
)

// LeftOut is what a backup never holds, and why, as a restore tells it.
var LeftOut = []string{
	"secret.key and egress-ca.key: keys are kept apart from backups",
	"stages/: staged trees (a change set pending when the backup was taken is restored expired)",
	"sessions/, journals/: sessions and applies in progress (runs in progress are reconciled by the restored server)",
	"imports/, clones/, moves/, sockets, corral.lock, node.credential: what lives only while a server runs",
}

// Manifest is the archive's last entry: what it holds and every entry's
// size and hash. Nothing in it is secret.
type Manifest struct {
	Format        string    `json:"format"`
	Version       int       `json:"version"`
	CreatedAt     time.Time `json:"created_at"`
	CorralVersion string    `json:"corral_version"`
	Schema        int64     `json:"schema_version"` // corral.db's migrations
	Holds         Holds     `json:"holds"`
	Traces        Traces    `json:"traces"`
	LeftOut       []string  `json:"left_out"`
	Files         []Entry   `json:"files"`
	// Bytes is the archive's size: what Take wrote, never in the file.
	Bytes int64 `json:"-"`
}

// Holds counts what a backup holds.
type Holds struct {
	Users             int64 `json:"users"`
	Agents            int64 `json:"agents"`
	Runs              int64 `json:"runs"`
	RunsInProgress    int64 `json:"runs_in_progress"`
	ChangeSets        int64 `json:"change_sets"`
	PendingChangeSets int64 `json:"pending_change_sets"`
	Messages          int64 `json:"messages"`
	Sealed            int64 `json:"sealed_secrets"` // credentials and secrets: they need secret.key
	DocumentStores    int64 `json:"document_stores"`
	Documents         int64 `json:"documents"`
	Workspaces        int64 `json:"workspaces"`
	WorkspaceFiles    int64 `json:"workspace_files"`
	WorkspaceBytes    int64 `json:"workspace_bytes"`
	Skipped           int64 `json:"skipped"` // devices, FIFOs and sockets in workspaces: never copied
	CACert            bool  `json:"egress_ca_cert"`
}

// Traces is what the backup's check of the trace chains found.
type Traces struct {
	Events int    `json:"events"`
	Chains int    `json:"chains"`
	Broken string `json:"broken,omitempty"` // the first break; "" when every chain verifies
}

// Entry is one entry of the archive.
type Entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"` // "file", "dir" or "symlink"
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Entry types.
const (
	typeFile    = "file"
	typeDir     = "dir"
	typeSymlink = "symlink"
)

// Options are what Take needs.
type Options struct {
	Data          string    // the data directory, absolute
	To            string    // the archive to write; replaced when it exists
	CorralVersion string    // recorded in the manifest
	Progress      io.Writer // where progress lines go; nil for nowhere
	// ApplyWait bounds how long a workspace is waited for while applies
	// keep changing it. Default two minutes.
	ApplyWait time.Duration
	Now       func() time.Time
}

// snapshotTries is how many snapshots of corral.db are taken before one
// whose traces do not verify is kept: a run's end is two writes (its
// status, then its ended event), and a snapshot between them shows a run
// ended without its ended event. The next snapshot does not.
const snapshotTries = 3

// Take writes a backup of opt.Data to opt.To and returns its manifest.
// The archive appears whole or not at all: it is written beside opt.To
// and renamed into place. A backup whose traces do not verify is still
// written (it is the best copy there is) and its manifest says where the
// first chain breaks.
func Take(ctx context.Context, opt Options) (Manifest, error) {
	if opt.ApplyWait <= 0 {
		opt.ApplyWait = 2 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if _, err := os.Stat(filepath.Join(opt.Data, dbFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Manifest{}, corral.Errorf(corral.ENOTFOUND, "there is no Corral database in %s: give the --data of a control that has started at least once", opt.Data)
		}
		return Manifest{}, corral.Internal("backup", err)
	}
	to, err := filepath.Abs(opt.To)
	if err != nil {
		return Manifest{}, corral.Internal("backup", err)
	}
	if within(opt.Data, to) {
		return Manifest{}, corral.Errorf(corral.EINVALID, "the backup file %s is inside the data directory: write it elsewhere", to)
	}
	// Snapshots and workspace copies wait beside the archive, on its
	// filesystem, not in a /tmp that may be small or in memory.
	tmp, err := os.MkdirTemp(filepath.Dir(to), ".corral-backup-")
	if err != nil {
		return Manifest{}, corral.Internal("backup", err)
	}
	defer os.RemoveAll(tmp)
	partial := to + ".tmp"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return Manifest{}, corral.Internal("backup", err)
	}
	t := &taker{opt: opt, tmp: tmp, progress: newProgress(opt.Progress, opt.Now)}
	t.w = newWriter(f, isGzip(to), t.progress)
	m, err := t.take(ctx)
	if err == nil {
		err = t.w.close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(partial, to)
	}
	if err != nil {
		os.Remove(partial)
		var e *corral.Error
		if errors.As(err, &e) {
			return Manifest{}, err
		}
		return Manifest{}, corral.Internal("backup", err)
	}
	syncDir(filepath.Dir(to))
	m.Bytes = t.w.written()
	t.progress.done(m.Bytes)
	return m, nil
}

// taker is one backup being taken.
type taker struct {
	opt      Options
	tmp      string
	w        *writer
	progress *progress
	m        Manifest
}

func (t *taker) take(ctx context.Context) (Manifest, error) {
	t.m = Manifest{Format: Format, Version: FormatVersion, CreatedAt: t.opt.Now().UTC(),
		CorralVersion: t.opt.CorralVersion, Schema: store.SchemaVersion(), LeftOut: LeftOut}
	// The database first: it is the point in time. A workspace, copied
	// after it, may hold an apply made while the backup ran; the database
	// never claims an apply its workspace lacks.
	agents, err := t.database(ctx)
	if err != nil {
		return Manifest{}, err
	}
	if err := t.documents(ctx, agents); err != nil {
		return Manifest{}, err
	}
	if err := t.workspaces(ctx, agents); err != nil {
		return Manifest{}, err
	}
	if err := t.caCert(); err != nil {
		return Manifest{}, err
	}
	t.m.Files = t.w.entries
	if err := t.w.manifest(t.m); err != nil {
		return Manifest{}, err
	}
	return t.m, nil
}

// database snapshots corral.db, checks the snapshot's traces and counts
// what it holds; it returns the agents' ids.
func (t *taker) database(ctx context.Context) ([]string, error) {
	snap := filepath.Join(t.tmp, "db", dbFile)
	if err := os.MkdirAll(filepath.Dir(snap), 0o700); err != nil {
		return nil, err
	}
	var census store.Census
	for try := 1; ; try++ {
		if err := removeDB(snap); err != nil {
			return nil, err
		}
		start := t.opt.Now()
		t.progress.step("taking a snapshot of %s (%s)", dbFile, Size(fileSize(filepath.Join(t.opt.Data, dbFile))))
		if err := vacuumInto(ctx, filepath.Join(t.opt.Data, dbFile), snap); err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", dbFile, err)
		}
		var err error
		census, t.m.Traces, err = checkDB(ctx, snap)
		if err != nil {
			return nil, err
		}
		t.progress.step("snapshot of %s taken (%s in %s)", dbFile, Size(fileSize(snap)), t.opt.Now().Sub(start).Round(time.Millisecond))
		if t.m.Traces.Broken == "" || try == snapshotTries {
			break
		}
		t.progress.step("the snapshot's traces do not verify (%s): taking it again", t.m.Traces.Broken)
	}
	t.m.Holds = Holds{Users: census.Users, Agents: census.Agents, Runs: census.Runs, RunsInProgress: census.RunsInProgress,
		ChangeSets: census.ChangeSets, PendingChangeSets: census.PendingChangeSets, Messages: census.Messages, Sealed: census.Sealed}
	if err := t.w.file(dbFile, snap, 0o600); err != nil {
		return nil, err
	}
	return census.AgentIDs, removeDB(snap)
}

// checkDB opens a snapshot as the server would (refusing one whose schema
// is not this release's), counts what it holds and verifies its traces.
func checkDB(ctx context.Context, path string) (store.Census, Traces, error) {
	db, err := store.OpenExisting(ctx, path)
	if err != nil {
		return store.Census{}, Traces{}, err
	}
	defer db.Close()
	census, err := db.Census(ctx)
	if err != nil {
		return store.Census{}, Traces{}, err
	}
	var tr Traces
	tr.Events, tr.Chains, err = verifyTraces(ctx, db)
	if err != nil {
		tr.Broken = err.Error()
	}
	return census, tr, nil
}

// caCert adds the egress CA's certificate, public, when there is one.
func (t *taker) caCert() error {
	path := filepath.Join(t.opt.Data, caCertFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	t.m.Holds.CACert = true
	return t.w.file(caCertFile, path, 0o644)
}

// within reports whether path is dir or under it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func isGzip(name string) bool {
	return strings.HasSuffix(name, ".gz") || strings.HasSuffix(name, ".tgz")
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
