package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver, as in internal/store

	"corral/internal/retrieval"
	"corral/internal/store"
	"corral/internal/trace"
)

// vacuumInto writes a snapshot of the SQLite database src to dst, which
// must not exist. The connection is read-only: it takes no lock a writer
// waits for (in WAL mode a reader never blocks the writer), and VACUUM
// INTO reads one transaction's view of the file however the server writes
// meanwhile.
func vacuumInto(ctx context.Context, src, dst string) error {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(src))
	db, err := sql.Open("sqlite", "file:"+esc+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, "VACUUM INTO ?", dst)
	return err
}

// removeDB removes a snapshot and what SQLite and the store leave beside it.
func removeDB(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", path + "-migrate.lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// verifyTraces checks every trace chain of db, and that every ended run's
// trace ends with its ended event: what `corral trace verify` checks.
func verifyTraces(ctx context.Context, db *store.DB) (events, chains int, err error) {
	return trace.VerifyStore(ctx, db, db)
}

// documentStore is one document store: its owner and its path under the
// data directory.
type documentStore struct {
	owner string // an agent's id, or retrieval.LibraryOwner
	path  string // slash-separated, relative to the data directory
}

func libraryStore() documentStore {
	return documentStore{owner: retrieval.LibraryOwner, path: documentsDir + "/library/documents.db"}
}

func agentStore(agentID string) documentStore {
	return documentStore{owner: agentID, path: documentsDir + "/agents/" + agentID + "/documents.db"}
}

// documents snapshots the library's store and the private store of every
// agent in the database snapshot. A store of an agent made after the
// snapshot is left out, as the agent is; one whose agent was deleted
// since is gone, and so left out too.
func (t *taker) documents(ctx context.Context, agents []string) error {
	stores := []documentStore{libraryStore()}
	for _, id := range agents {
		stores = append(stores, agentStore(id))
	}
	sort.Slice(stores, func(i, j int) bool { return stores[i].path < stores[j].path })
	for _, s := range stores {
		src := filepath.Join(t.opt.Data, filepath.FromSlash(s.path))
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		snap := filepath.Join(t.tmp, "documents.db")
		if err := removeDB(snap); err != nil {
			return err
		}
		start := t.opt.Now()
		if err := vacuumInto(ctx, src, snap); err != nil {
			if _, serr := os.Stat(src); errors.Is(serr, fs.ErrNotExist) {
				continue // its agent was deleted while the backup ran
			}
			return fmt.Errorf("snapshot of %s: %w", s.path, err)
		}
		n, err := countDocuments(ctx, snap, s.owner)
		if err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		t.progress.step("snapshot of %s taken (%s in %s)", s.path, Size(fileSize(snap)), t.opt.Now().Sub(start).Round(time.Millisecond))
		if err := t.w.parents(t.opt.Data, s.path); err != nil {
			return err
		}
		if err := t.w.file(s.path, snap, 0o600); err != nil {
			return err
		}
		t.m.Holds.DocumentStores++
		t.m.Holds.Documents += n
	}
	return nil
}

// countDocuments opens a document store as the server does and counts
// its documents.
func countDocuments(ctx context.Context, path, owner string) (int64, error) {
	x, err := retrieval.Open(ctx, path, owner)
	if err != nil {
		return 0, err
	}
	defer x.Close()
	docs, err := x.Documents(ctx)
	return int64(len(docs)), err
}
