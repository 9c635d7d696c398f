package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Recover finishes or rolls back every journal left in journalDir for dir
// (after a crash), and removes them: a committed journal is finished, any
// other is rolled back from its backups and the result verified by hash.
// Afterwards the workspace is exactly the before-image or the after-image
// of each interrupted apply. Journals of other workspaces are left alone.
// A journal whose rollback cannot be verified is kept, and Recover returns
// an error; calling it again retries. Safe to call at every start-up, and
// idempotent; it must not run while an Apply on the same dir is running.
func Recover(dir, journalDir string, hook Hook) error {
	const op = "workspace.Recover"
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return corral.Internal(op, err)
	}
	absJournal, err := filepath.Abs(journalDir)
	if err != nil {
		return corral.Internal(op, err)
	}
	if err := separateDirs(absDir, absJournal); err != nil {
		return err
	}
	if err := hook.step("recover-list"); err != nil {
		return corral.Internal(op, err)
	}
	des, err := os.ReadDir(absJournal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return corral.Internal(op, err)
	}

	var t *dirTree
	defer func() {
		if t != nil {
			t.close()
		}
	}()
	var errs []error
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || de.IsDir() || sanitize.ID("change set", id) != nil {
			continue
		}
		if err := hook.step("recover-read " + id); err != nil {
			errs = append(errs, err)
			continue
		}
		j, err := readJournal(absJournal, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j.Dir != absDir {
			continue
		}
		if t == nil {
			if err := hook.step("recover-open-workspace"); err != nil {
				return corral.Internal(op, errors.Join(append(errs, err)...))
			}
			if t, err = openTree(absDir); err != nil {
				return corral.Internal(op, errors.Join(append(errs, err)...))
			}
		}
		// A committed journal has nothing left to do in the workspace:
		// deletions come before the commit mark and every temporary has
		// been renamed into place. Only its files in journalDir remain.
		if j.State != stateCommitted {
			if err := rollback(t, absJournal, j, hook); err != nil {
				errs = append(errs, fmt.Errorf("roll back %s: %w", id, err))
				continue
			}
		}
		if err := finishJournal(absJournal, id, hook); err != nil {
			errs = append(errs, fmt.Errorf("clean up %s: %w", id, err))
		}
	}
	if err := removeStrays(absDir, absJournal, hook); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return corral.Internal(op, errors.Join(errs...))
	}
	return nil
}

// removeStrays removes what a crash can leave in journalDir without a
// journal: a journal temporary that never reached its name (nothing in the
// workspace was touched yet). A backup directory never outlives its
// journal: it is made after the journal and removed before it.
func removeStrays(absDir, journalDir string, hook Hook) error {
	if err := hook.step("recover-list-strays"); err != nil {
		return err
	}
	des, err := os.ReadDir(journalDir)
	if err != nil {
		return err
	}
	has := map[string]bool{}
	for _, de := range des {
		has[de.Name()] = true
	}
	var errs []error
	removed := false
	for _, de := range des {
		name := de.Name()
		id, ok := strings.CutSuffix(name, ".json.tmp")
		if !ok || de.IsDir() || sanitize.ID("change set", id) != nil || has[id+".json"] {
			continue
		}
		// A temporary that names another workspace belongs to that
		// workspace's recovery; one that does not parse was cut short
		// before it named anything, and is garbage.
		if j, err := parseJournalFile(filepath.Join(journalDir, name)); err == nil && j.Dir != absDir {
			continue
		}
		if err := hook.step("remove-stray " + name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(filepath.Join(journalDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = true
	}
	if removed {
		if err := hook.step("sync-journal-dir"); err != nil {
			errs = append(errs, err)
		} else if err := syncPath(journalDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func parseJournalFile(p string) (*journal, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return decodeJournal(data, strings.TrimSuffix(filepath.Base(p), ".json.tmp"))
}

// rollback puts every path of j back to its before-image and verifies the
// result by hash. Each step checks what is there before acting, so a
// rollback may be interrupted and run again any number of times. An error
// means the workspace could not be shown to be the before-image; the
// journal must then be kept.
func rollback(t *dirTree, journalDir string, j *journal, hook Hook) error {
	if err := hook.step("rollback-check"); err != nil {
		return err
	}
	if marked, err := hasMark(journalDir, j.ID); err != nil {
		return err
	} else if !marked {
		// The apply stopped before its first change to the workspace.
		return nil
	}
	var errs []error
	for i := len(j.Entries) - 1; i >= 0; i-- {
		if err := undoEntry(t, journalDir, j.ID, j.Entries[i], hook); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(j.Dirs) - 1; i >= 0; i-- {
		d := j.Dirs[i]
		if err := hook.step("rollback-rmdir " + d); err != nil {
			errs = append(errs, err)
			continue
		}
		// A directory that is not empty holds what someone else put there
		// while the apply ran (verifyRollback checks that none of it is
		// the apply's): it stays.
		if err := t.rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errNotEmpty) {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	for _, d := range touchedDirs(j) {
		if err := hook.step("rollback-sync-dir " + d); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := t.syncDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("sync %s: %w", d, err))
		}
	}
	if err := hook.step("rollback-verify"); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := verifyRollback(t, j); err != nil {
		return errors.Join(append(errs, err)...)
	}
	// The before-image is in place: what failed on the way did not matter.
	return nil
}

// undoEntry puts one entry's path back to its before-image.
func undoEntry(t *dirTree, journalDir, id string, e journalEntry, hook Hook) error {
	if err := hook.step("rollback-remove-temp " + e.Path); err != nil {
		return err
	}
	if err := t.removeTemp(e.Path, e.Temp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the temporary of %s: %w", e.Path, err)
	}
	if e.Op == OpCreate {
		if err := hook.step("rollback-remove " + e.Path); err != nil {
			return err
		}
		ours, err := t.wrote(e)
		if err != nil {
			return fmt.Errorf("roll back %s: %w", e.Path, err)
		}
		if !ours {
			return nil
		}
		if err := t.remove(e.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("roll back %s: %w", e.Path, err)
		}
		return nil
	}

	if err := hook.step("rollback-restore " + e.Path); err != nil {
		return err
	}
	st, err := t.state(e.Path)
	if err == nil && *st == *e.Old {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errNotRegular) {
		return fmt.Errorf("roll back %s: %w", e.Path, err)
	}
	if err := t.restore(e, filepath.Join(backupDir(journalDir, id), e.Backup)); err != nil {
		return fmt.Errorf("roll back %s: %w", e.Path, err)
	}
	return nil
}

// wrote says whether the file at the path of a create is the one the apply
// wrote. Anything else there (nothing, or what someone else put there while
// the apply ran, which the no-replace rename refused to overwrite) is not
// the apply's to remove.
func (t *dirTree) wrote(e journalEntry) (bool, error) {
	st, err := t.state(e.Path)
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, errNotRegular):
		return false, nil
	case err != nil:
		return false, err
	}
	return st.SHA256 == e.NewSHA256, nil
}

// restore puts the backup of e back in place: to a temporary first, with
// the old owner and mode, then renamed over whatever is at the path.
func (t *dirTree) restore(e journalEntry, backup string) error {
	in, err := os.Open(backup)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := t.createTemp(e.Path, e.Temp, e.Old.Mode, e.Old)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), in)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != e.Old.SHA256 {
		err = errors.New("the backup does not have the before-image's hash")
	}
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.rename(e.Path, e.Temp, false)
	}
	if err != nil {
		t.removeTemp(e.Path, e.Temp)
	}
	return err
}

// verifyRollback checks, by hash, that every path j touched is its
// before-image: modified and deleted files are back with their content,
// mode and owner; created files, created directories and temporaries are
// gone. What someone else created meanwhile at a created path, or in a
// created directory, is not the apply's and may stay.
func verifyRollback(t *dirTree, j *journal) error {
	var errs []error
	absent := func(p string) {
		if err := t.lstat(p); err == nil {
			errs = append(errs, fmt.Errorf("%s is still there", p))
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	for _, e := range j.Entries {
		absent(path.Join(path.Dir(e.Path), e.Temp))
		if e.Op == OpCreate {
			if ours, err := t.wrote(e); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
			} else if ours {
				errs = append(errs, fmt.Errorf("%s is still there", e.Path))
			}
			continue
		}
		st, err := t.state(e.Path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
		case *st != *e.Old:
			errs = append(errs, fmt.Errorf("%s is not its before-image", e.Path))
		}
	}
	for _, d := range j.Dirs {
		if err := t.lstat(d); err == nil {
			if empty, err := t.emptyDir(d); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d, err))
			} else if empty {
				errs = append(errs, fmt.Errorf("%s is still there", d))
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("rollback verification failed: %w", errors.Join(errs...))
	}
	return nil
}
