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
	"sort"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Source gives the new content of a staged path (the run's staged tree).
// The permission bits come from the entry, never from the source.
type Source interface {
	Open(path string) (io.ReadCloser, error)
}

// DirSource reads from a directory on disk (the staged tree). The staged
// tree was written by the agent, so it is resolved like the persistent
// tree: no symbolic link is followed and only regular files are read.
type DirSource string

// Open opens the staged file at the slash-separated path p.
func (d DirSource) Open(p string) (io.ReadCloser, error) {
	if err := validPath(p); err != nil {
		return nil, err
	}
	t, err := openTree(string(d))
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.openFile(p)
}

// MoveSource is a Source whose files Apply moves into the workspace
// instead of copying them: a private directory the caller wrote and hashed
// itself (an import's extracted tree), that nothing else can write, on the
// workspace's file system. Apply takes each entry's hash on the caller's
// word (reading every file again would double the cost of a large import),
// but still resolves every path without following a link, moves only
// regular files, sets the owner and the mode bits, and copies instead when
// the tree is on another file system. What Apply moved is no longer in the
// directory afterwards, whatever the outcome: the caller removes the rest.
type MoveSource string

// Open opens the file at p for copying, as DirSource does.
func (m MoveSource) Open(p string) (io.ReadCloser, error) { return DirSource(m).Open(p) }

// batchSyncMin is the number of entries from which Apply makes its new
// files and directories durable with one syncfs of the workspace's file
// system per phase instead of one fsync per file and per directory: on
// ext4 every fsync commits the journal, and an import of 50,000 files
// spent most of its time there. Smaller change sets keep the fsyncs, which
// do not wait for other writers' dirty pages. A variable for the tests.
var batchSyncMin = 256

// Hook, when set, is called before every I/O step of an apply or a
// recovery with a name for the step; returning an error makes that step
// fail as if the I/O had failed. Tests inject faults with it; production
// passes nil.
type Hook func(step string) error

// step runs the hook for one named step.
func (h Hook) step(name string) error {
	if h == nil {
		return nil
	}
	if err := h(name); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Apply applies entries (already approved; every entry has Class !=
// protected — protected ones are refused with EINVALID) to the persistent
// workspace dir, all or nothing, using journalDir (outside dir; created if
// missing) for its journal and backups.
//
// It returns ECONFLICT naming the path when any entry's base does not match
// the persistent tree (create: the path must not exist; modify and delete:
// the file's SHA-256 must equal OldSHA256) or when the staged content no
// longer has the approved hash; EINVALID for a malformed entry or a path
// that passes through a symbolic link. A conflict found before the journal
// is written changes nothing and leaves no journal.
//
// Any failure before the commit mark rolls the workspace back from the
// backups and verifies the result by hash. When that verification fails
// the error says so and the journal stays for Recover. Once the commit
// mark is durable Apply returns nil: clean-up that fails afterwards is left
// to Recover.
//
// No symbolic link in dir is ever followed: every step resolves its path
// again from dir, one component at a time, refusing links, so a directory
// swapped for a link during the apply makes the apply fail instead of
// writing outside dir.
//
// Every entry must be classified ordinary or risky and carry no flag. New
// files get the entry's permission bits and the owner of their directory
// (a replaced file keeps its owner); directories Apply creates get 0755
// and the owner of their parent. Directories emptied by deletions stay.
//
// Apply and Recover must not run concurrently on the same dir and
// journalDir: the caller serialises them per workspace. Elsewhere than
// Linux, Apply refuses with EUNAVAIL.
func Apply(dir, journalDir string, id string, entries []Entry, src Source, hook Hook) error {
	absDir, absJournal, err := validateApply(dir, journalDir, id, entries, src)
	if err != nil {
		return err
	}
	a := &applier{hook: hook, journalDir: absJournal}
	if err := hook.step("open-workspace"); err != nil {
		return applyError(id, err)
	}
	t, err := openTree(absDir)
	if err != nil {
		return applyError(id, err)
	}
	defer t.close()
	a.t = t

	j, err := a.plan(absDir, id, entries)
	if err != nil {
		return applyError(id, err)
	}
	a.j = j

	if err := hook.step("journal-mkdir"); err != nil {
		return applyError(id, err)
	}
	if err := mkdirDurable(absJournal); err != nil {
		return applyError(id, err)
	}
	if _, err := os.Lstat(journalPath(absJournal, id)); err == nil {
		return &corral.Error{Code: corral.ECONFLICT, Op: "workspace.Apply",
			Message: "an earlier apply of this change set has not been recovered yet"}
	} else if !errors.Is(err, os.ErrNotExist) {
		return applyError(id, err)
	}
	written, err := writeJournal(absJournal, j, hook, "journal")
	if err != nil {
		if !written {
			// Nothing in dir was touched and no journal is in place: drop
			// the temporary journal, if any (Recover drops it otherwise).
			if cerr := a.removeJournalTemp(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return applyError(id, err)
		}
		return a.fail(err)
	}

	if err := a.forward(src); err != nil {
		return a.fail(err)
	}

	committed, err := a.commit()
	if err != nil {
		if !committed {
			return a.fail(err)
		}
		// The commit mark is in place (Recover will finish the apply) but
		// it may not be durable: say so rather than claim success.
		return &corral.Error{Code: corral.EINTERNAL, Op: "workspace.Apply",
			Message: "the changes were applied but could not be made durable",
			Err:     fmt.Errorf("apply %s: %w", id, err)}
	}
	// The apply has happened. A failed clean-up leaves the journal, marked
	// committed, for Recover to remove; the workspace is already right.
	_ = finishJournal(a.journalDir, j.ID, hook)
	return nil
}

// Conflicts checks, without changing anything, each entry's base against
// the persistent workspace dir as Apply would, and returns the entries whose
// base no longer holds, each with the reason in words (a *corral.Error with
// ECONFLICT). An error is a failure to check, not a conflict. The caller
// serialises it with the workspace's writers, as for Apply.
func Conflicts(dir string, entries []Entry) (map[string]error, error) {
	for _, e := range entries {
		if err := validPath(e.Path); err != nil {
			return nil, err
		}
	}
	t, err := openTree(dir)
	if err != nil {
		return nil, applyError("conflicts", err)
	}
	defer t.close()
	a := &applier{t: t}
	out := map[string]error{}
	for _, e := range entries {
		if e.Op == OpCreate {
			_, err = a.checkAbsent(e.Path)
		} else {
			_, err = a.checkBase(e.Path, strings.ToLower(e.OldSHA256))
		}
		switch {
		case corral.ErrorCode(err) == corral.ECONFLICT:
			out[e.Path] = err
		case err != nil:
			return nil, applyError("conflicts", err)
		}
	}
	return out, nil
}

// applier carries one apply through its steps.
type applier struct {
	t          *dirTree
	j          *journal
	journalDir string
	hook       Hook
}

// fail rolls back after a failure that happened once the journal was in
// place, and says what became of the workspace.
func (a *applier) fail(cause error) error {
	if rerr := rollback(a.t, a.journalDir, a.j, a.hook); rerr != nil {
		return &corral.Error{Code: corral.EINTERNAL, Op: "workspace.Apply",
			Message: "the apply failed and the workspace could not be restored yet; recovery will finish the rollback",
			Err:     fmt.Errorf("apply %s: %w", a.j.ID, errors.Join(cause, rerr))}
	}
	// The workspace is its before-image again. A journal that cannot be
	// removed now is removed by Recover.
	_ = finishJournal(a.journalDir, a.j.ID, a.hook)
	return applyError(a.j.ID, cause)
}

// applyError keeps conflicts, invalid input and an unsupported platform as
// they are and makes everything else internal.
func applyError(id string, err error) error {
	var e *corral.Error
	if errors.As(err, &e) && (e.Code == corral.ECONFLICT || e.Code == corral.EINVALID || e.Code == corral.EUNAVAIL) {
		return err
	}
	return corral.Internal("workspace.Apply", fmt.Errorf("apply %s: %w", id, err))
}

// validateApply checks everything that needs no I/O, so that a malformed
// request touches nothing. It returns dir and journalDir made absolute.
func validateApply(dir, journalDir, id string, entries []Entry, src Source) (string, string, error) {
	invalid := func(format string, args ...any) error {
		e := corral.Errorf(corral.EINVALID, format, args...)
		e.Op = "workspace.Apply"
		return e
	}
	// The id names the journal's file and the temporaries.
	if err := sanitize.ID("change set", id); err != nil {
		return "", "", err
	}
	if dir == "" || journalDir == "" {
		return "", "", invalid("workspace and journal directories are required")
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", "", corral.Internal("workspace.Apply", err)
	}
	absJournal, err := filepath.Abs(journalDir)
	if err != nil {
		return "", "", corral.Internal("workspace.Apply", err)
	}
	if err := separateDirs(absDir, absJournal); err != nil {
		return "", "", err
	}
	if len(entries) == 0 {
		return "", "", invalid("the change set has no entries")
	}
	seen := make(map[string]bool, len(entries))
	needSource := false
	for _, e := range entries {
		if err := validPath(e.Path); err != nil {
			return "", "", err
		}
		if seen[e.Path] {
			return "", "", invalid("path %q appears twice in the change set", e.Path)
		}
		seen[e.Path] = true
		if e.Class == ClassProtected || hasProtectingFlag(e.Flags) {
			return "", "", invalid("%q is protected and is never applied", e.Path)
		}
		if e.Class != ClassOrdinary && e.Class != ClassRisky {
			return "", "", invalid("%q has no valid class", e.Path)
		}
		if strings.HasPrefix(path.Base(e.Path), tempPrefix) {
			return "", "", invalid("%q is a name Corral reserves for itself", e.Path)
		}
		switch e.Op {
		case OpCreate:
			if e.OldSHA256 != "" || !validSHA(e.NewSHA256) || !e.Mode.IsRegular() {
				return "", "", invalid("create of %q needs a new hash, no old hash and a regular file mode", e.Path)
			}
			needSource = true
		case OpModify:
			if !validSHA(e.OldSHA256) || !validSHA(e.NewSHA256) || !e.Mode.IsRegular() {
				return "", "", invalid("modify of %q needs old and new hashes and a regular file mode", e.Path)
			}
			needSource = true
		case OpDelete:
			if !validSHA(e.OldSHA256) || e.NewSHA256 != "" {
				return "", "", invalid("delete of %q needs an old hash and no new hash", e.Path)
			}
		default:
			return "", "", invalid("%q has an unknown operation %q", e.Path, e.Op)
		}
	}
	// A path cannot be a file of the change set and a directory of another
	// of its paths at once.
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return "", "", invalid("%q is both a file and a directory in the change set", d)
			}
		}
	}
	if needSource && src == nil {
		return "", "", invalid("no source for the new content")
	}
	return absDir, absJournal, nil
}

// separateDirs refuses a journal directory inside the workspace (the agent
// would see it) and a workspace inside the journal directory (recovery
// removes what it does not know there).
func separateDirs(absDir, absJournal string) error {
	inside := func(parent, child string) bool {
		rel, err := filepath.Rel(parent, child)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	if inside(absDir, absJournal) || inside(absJournal, absDir) {
		return &corral.Error{Code: corral.EINVALID, Op: "workspace.Apply",
			Message: "the journal directory and the workspace must not contain each other"}
	}
	return nil
}

// validPath accepts only a clean, relative, slash-separated path that stays
// beneath the workspace root and passes the path rules (sanitize.Path).
func validPath(p string) error {
	if err := structuralPath(p); err != nil {
		return err
	}
	if rule, why := sanitize.StoredPath(p); rule != "" {
		return &corral.Error{Code: corral.EINVALID, Op: "workspace.Apply",
			Message: fmt.Sprintf("%q: %s", sanitize.Escape(p), why)}
	}
	return nil
}

// structuralPath accepts a clean, relative, slash-separated path that stays
// beneath the workspace root, whatever its names: what a journal may hold,
// so that recovery can still roll back an apply an older version made.
func structuralPath(p string) error {
	bad := p == "" || p == "." || strings.ContainsRune(p, 0) || path.IsAbs(p) ||
		path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../")
	if !bad {
		for _, c := range strings.Split(p, "/") {
			if c == "." || c == ".." || c == "" {
				bad = true
			}
		}
	}
	if bad {
		return &corral.Error{Code: corral.EINVALID, Op: "workspace.Apply",
			Message: fmt.Sprintf("invalid path %q: it must be relative, clean and stay inside the workspace", p)}
	}
	return nil
}

func validSHA(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// tempPrefix starts the name of every temporary Corral puts in a workspace.
const tempPrefix = ".corral-tmp-"

// plan checks every entry's base against the persistent tree and works out
// the journal: the before-image of each file, the directories to create and
// the temporary names. It writes nothing.
func (a *applier) plan(absDir, id string, entries []Entry) (*journal, error) {
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, k int) bool { return sorted[i].Path < sorted[k].Path })
	j := &journal{Version: journalVersion, ID: id, Dir: absDir, State: statePrepared}
	dirs := map[string]bool{}
	for i, e := range sorted {
		if err := a.hook.step("check " + e.Path); err != nil {
			return nil, err
		}
		je := journalEntry{
			Path:      e.Path,
			Op:        e.Op,
			OldSHA256: strings.ToLower(e.OldSHA256),
			NewSHA256: strings.ToLower(e.NewSHA256),
			NewMode:   uint32(e.Mode.Perm()),
			Temp:      fmt.Sprintf("%s%s-%d", tempPrefix, id, i),
			Backup:    fmt.Sprint(i),
		}
		if e.Op == OpCreate {
			missing, err := a.checkAbsent(e.Path)
			if err != nil {
				return nil, err
			}
			for _, d := range missing {
				dirs[d] = true
			}
		} else {
			old, err := a.checkBase(e.Path, je.OldSHA256)
			if err != nil {
				return nil, err
			}
			je.Old = old
		}
		j.Entries = append(j.Entries, je)
	}
	for d := range dirs {
		j.Dirs = append(j.Dirs, d)
	}
	// Sorted, a directory comes before everything beneath it.
	sort.Strings(j.Dirs)
	return j, nil
}

// checkAbsent checks that the path of a create does not exist, and returns
// the directories above it that do not exist either.
func (a *applier) checkAbsent(p string) ([]string, error) {
	missing, err := a.t.missingDirs(path.Dir(p))
	if err != nil {
		return nil, pathError(p, err)
	}
	if len(missing) > 0 {
		return missing, nil
	}
	if err := a.t.lstat(p); err == nil {
		return nil, conflictError(p, "it was created in the workspace since the run saw it", nil)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, pathError(p, err)
	}
	return nil, nil
}

// checkBase checks that the file at p has the hash the change set was
// made against, and returns its before-image.
func (a *applier) checkBase(p, oldSHA string) (*fileState, error) {
	st, err := a.t.state(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, conflictError(p, "it no longer exists in the workspace", err)
		}
		if errors.Is(err, errNotRegular) {
			return nil, conflictError(p, "it is no longer a regular file in the workspace", err)
		}
		return nil, pathError(p, err)
	}
	if st.SHA256 != oldSHA {
		return nil, conflictError(p, "it changed in the workspace since the run saw it", nil)
	}
	return st, nil
}

// conflictError reports that the workspace no longer matches the change set.
func conflictError(p, why string, err error) error {
	return &corral.Error{Code: corral.ECONFLICT, Op: "workspace.Apply",
		Message: fmt.Sprintf("conflict on %q: %s", p, why), Err: err}
}

// pathError turns a failure to resolve p into the error the caller sees:
// a symbolic link on the way is invalid, a file where a directory should be
// is a conflict, anything else is left as it is.
func pathError(p string, err error) error {
	switch {
	case errors.Is(err, errSymlink):
		return &corral.Error{Code: corral.EINVALID, Op: "workspace.Apply",
			Message: fmt.Sprintf("path %q passes through a symbolic link in the workspace", p), Err: err}
	case errors.Is(err, errNotDir):
		return conflictError(p, "a directory above it is not a directory in the workspace", err)
	}
	return err
}

// removeJournalTemp drops the temporary of a journal that never reached
// its name.
func (a *applier) removeJournalTemp() error {
	if err := a.hook.step("remove-journal-temp"); err != nil {
		return err
	}
	return removeIfExists(journalPath(a.journalDir, a.j.ID) + ".tmp")
}

// forward does the apply itself: backups, directories, temporaries,
// renames, deletions and directory syncs, in that order.
func (a *applier) forward(src Source) error {
	j, h := a.j, a.hook
	bdir := backupDir(a.journalDir, j.ID)
	if err := h.step("mkdir-backups"); err != nil {
		return err
	}
	if err := os.MkdirAll(bdir, 0o700); err != nil {
		return err
	}
	for _, e := range j.Entries {
		if e.Old == nil {
			continue
		}
		if err := a.backup(e, filepath.Join(bdir, e.Backup)); err != nil {
			return err
		}
	}
	if err := h.step("sync-backups"); err != nil {
		return err
	}
	for _, d := range []string{bdir, filepath.Dir(bdir), a.journalDir} {
		if err := syncPath(d); err != nil {
			return err
		}
	}
	// Nothing in the workspace changes before this mark is durable; a
	// rollback that finds no mark has nothing to undo there.
	if err := h.step("mark-backups"); err != nil {
		return err
	}
	if err := writeMark(a.journalDir, j.ID); err != nil {
		return err
	}

	for _, d := range j.Dirs {
		if err := h.step("mkdir " + d); err != nil {
			return err
		}
		if err := a.t.mkdir(d); err != nil {
			return pathError(d, err)
		}
	}

	// Every new file is complete and synced under its temporary name
	// before the first one takes its place.
	batch := len(j.Entries) >= batchSyncMin
	var moveFrom *dirTree
	if m, ok := src.(MoveSource); ok {
		var err error
		if moveFrom, err = openTree(string(m)); err != nil {
			return err
		}
		defer moveFrom.close()
	}
	for _, e := range j.Entries {
		if e.Op == OpDelete {
			continue
		}
		if err := a.writeTemp(e, src, moveFrom, batch); err != nil {
			return err
		}
	}
	if batch {
		if err := h.step("sync-temps"); err != nil {
			return err
		}
		if err := a.t.syncAll(); err != nil {
			return err
		}
	}
	for _, e := range j.Entries {
		if e.Op == OpDelete {
			continue
		}
		if err := h.step("rename " + e.Path); err != nil {
			return err
		}
		if err := a.t.rename(e.Path, e.Temp, e.Op == OpCreate); err != nil {
			if errors.Is(err, os.ErrExist) {
				return conflictError(e.Path, "it was created in the workspace during the apply", err)
			}
			return pathError(e.Path, err)
		}
	}
	for _, e := range j.Entries {
		if e.Op != OpDelete {
			continue
		}
		if err := h.step("delete " + e.Path); err != nil {
			return err
		}
		if err := a.t.remove(e.Path); err != nil {
			return pathError(e.Path, err)
		}
	}
	if batch {
		if err := h.step("sync-dirs"); err != nil {
			return err
		}
		return a.t.syncAll()
	}
	for _, d := range touchedDirs(j) {
		if err := h.step("sync-dir " + d); err != nil {
			return err
		}
		if err := a.t.syncDir(d); err != nil {
			return pathError(d, err)
		}
	}
	return nil
}

// backup copies the persistent file of e into the journal, checking on the
// way that it still has the hash the base check saw.
func (a *applier) backup(e journalEntry, name string) error {
	if err := a.hook.step("backup " + e.Path); err != nil {
		return err
	}
	in, err := a.t.openFile(e.Path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotRegular) {
		return conflictError(e.Path, "it changed in the workspace during the apply", err)
	}
	if err != nil {
		return pathError(e.Path, err)
	}
	defer in.Close()
	out, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != e.Old.SHA256 {
		err = conflictError(e.Path, "it changed in the workspace during the apply", nil)
	}
	if err != nil {
		out.Close()
		return err
	}
	if err := a.hook.step("sync-backup " + e.Path); err != nil {
		out.Close()
		return err
	}
	if err := syncFile(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeTemp writes the new content of e to its temporary, next to its
// target, with the entry's permission bits and the right owner: moved
// from moveFrom (a MoveSource's tree) when set, else copied from src.
// batch leaves the fsync to the caller's syncAll.
func (a *applier) writeTemp(e journalEntry, src Source, moveFrom *dirTree, batch bool) error {
	if err := a.hook.step("write-temp " + e.Path); err != nil {
		return err
	}
	if moveFrom != nil {
		err := a.t.moveTemp(moveFrom, e.Path, e.Temp, e.NewMode, e.Old)
		switch {
		case errors.Is(err, errOtherFS):
			// Copied below.
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotRegular) || errors.Is(err, errSymlink) || errors.Is(err, errNotDir):
			return conflictError(e.Path, "the staged file changed after the change set was made", err)
		case err != nil:
			return pathError(e.Path, err)
		default:
			if batch {
				return nil
			}
			if err := a.hook.step("sync-temp " + e.Path); err != nil {
				return err
			}
			return a.t.syncTemp(e.Path, e.Temp)
		}
	}
	r, err := src.Open(e.Path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotRegular) || errors.Is(err, errSymlink) || errors.Is(err, errNotDir) {
		return conflictError(e.Path, "the staged file changed after the change set was made", err)
	}
	if err != nil {
		return fmt.Errorf("open staged %s: %w", e.Path, err)
	}
	defer r.Close()
	// A new file takes the owner of its directory (the workspace belongs to
	// the sandbox's host user, not to us); a replaced one keeps its owner.
	f, err := a.t.createTemp(e.Path, e.Temp, e.NewMode, e.Old)
	if err != nil {
		return pathError(e.Path, err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), r)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != e.NewSHA256 {
		err = conflictError(e.Path, "the staged file changed after the change set was made", nil)
	}
	if err == nil && !batch {
		err = a.hook.step("sync-temp " + e.Path)
		if err == nil {
			err = syncFile(f)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// commit marks the journal committed. committed says whether the mark
// reached the journal's final name, even if it could not be made durable.
func (a *applier) commit() (committed bool, err error) {
	j := *a.j
	j.State = stateCommitted
	return writeJournal(a.journalDir, &j, a.hook, "commit")
}

// touchedDirs lists every directory whose entries an apply changes: the
// parents of the entries and of the directories it creates.
func touchedDirs(j *journal) []string {
	set := map[string]bool{}
	for _, e := range j.Entries {
		set[path.Dir(e.Path)] = true
	}
	for _, d := range j.Dirs {
		set[path.Dir(d)] = true
	}
	dirs := make([]string, 0, len(set))
	for d := range set {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// Errors of path resolution.
var (
	errSymlink    = errors.New("symbolic link in the path")
	errNotDir     = errors.New("not a directory")
	errNotRegular = errors.New("not a regular file")
	errNotEmpty   = errors.New("directory not empty")
	errOtherFS    = errors.New("source on another file system")
)
