package workspace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The journal of an apply lives in the journal directory, outside the
// workspace:
//
//	<journalDir>/<id>.json           the journal: what the apply does and the before-image
//	<journalDir>/<id>.json.tmp       a journal being written (a rename makes it the journal)
//	<journalDir>/<id>/backup/<n>     the before-image of the n-th entry's file
//	<journalDir>/<id>/backed-up      the mark: every backup is durable, the workspace may change
//
// The journal reaches its final name, durably, before the workspace is
// touched, and says "committed" only once every change is in place and
// durable. Recover reads what is left: a committed journal is finished,
// any other is rolled back.

const journalVersion = 1

// Journal states.
const (
	statePrepared  = "prepared"  // the apply may have changed anything: roll back
	stateCommitted = "committed" // every change is in place: finish
)

// journal is what an apply writes before it touches the workspace.
type journal struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Dir     string `json:"dir"` // the workspace, absolute
	State   string `json:"state"`
	// Dirs are the directories the apply creates, parents first; a
	// rollback removes them.
	Dirs []string `json:"created_dirs,omitempty"`
	// Entries, sorted by path, come last: encodeJournal writes them one
	// at a time after the rest.
	Entries []journalEntry `json:"entries"`
}

// journalEntry is one entry of the change set with what its rollback
// needs.
type journalEntry struct {
	Path      string `json:"path"`
	Op        string `json:"op"`
	OldSHA256 string `json:"old_sha256,omitempty"`
	NewSHA256 string `json:"new_sha256,omitempty"`
	NewMode   uint32 `json:"new_mode,omitempty"` // permission bits of the new file
	// Old is the before-image of a modified or deleted file, as the base
	// check saw it.
	Old *fileState `json:"old,omitempty"`
	// Temp is the name of the entry's temporary, in the directory of Path.
	Temp string `json:"temp"`
	// Backup is the name of the backup of Old under <id>/backup.
	Backup string `json:"backup"`
}

// fileState is what a rollback restores and what its verification checks.
type fileState struct {
	SHA256 string `json:"sha256"`
	Mode   uint32 `json:"mode"` // permission, set-id and sticky bits
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
}

func journalPath(journalDir, id string) string {
	return filepath.Join(journalDir, id+".json")
}

func backupDir(journalDir, id string) string {
	return filepath.Join(journalDir, id, "backup")
}

func markPath(journalDir, id string) string {
	return filepath.Join(journalDir, id, "backed-up")
}

// writeMark records, durably, that every backup of id is durable.
func writeMark(journalDir, id string) error {
	f, err := os.OpenFile(markPath(journalDir, id), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncPath(filepath.Join(journalDir, id))
}

// hasMark says whether the workspace may have been changed by id's apply.
func hasMark(journalDir, id string) (bool, error) {
	_, err := os.Lstat(markPath(journalDir, id))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// writeJournal writes j under its final name through a temporary, in four
// steps named after prefix. renamed says whether j reached its final name.
func writeJournal(journalDir string, j *journal, hook Hook, prefix string) (renamed bool, err error) {
	final := journalPath(journalDir, j.ID)
	tmp := final + ".tmp"
	if err := hook.step(prefix + "-write"); err != nil {
		return false, err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	if err := encodeJournal(f, j); err != nil {
		f.Close()
		return false, err
	}
	if err := hook.step(prefix + "-sync"); err != nil {
		f.Close()
		return false, err
	}
	if err := syncFile(f); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := hook.step(prefix + "-rename"); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return false, err
	}
	if err := hook.step(prefix + "-sync-dir"); err != nil {
		return true, err
	}
	return true, syncPath(journalDir)
}

// encodeJournal writes j as JSON, one entry at a time: a journal of an
// import can have 100,000 entries, and marshalling it whole would hold
// them all a second time, as text.
func encodeJournal(f io.Writer, j *journal) error {
	head, err := json.Marshal(journal{Version: j.Version, ID: j.ID, Dir: j.Dir, State: j.State, Dirs: j.Dirs})
	if err != nil {
		return err
	}
	// head ends with "entries":null}; the entries replace the null.
	head = bytes.TrimSuffix(head, []byte("null}"))
	if !bytes.HasSuffix(head, []byte(`"entries":`)) {
		return fmt.Errorf("journal head %q: unexpected encoding", head)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.Write(head)
	w.WriteByte('[')
	for i := range j.Entries {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
		line, err := json.Marshal(&j.Entries[i])
		if err != nil {
			return err
		}
		w.Write(line)
	}
	w.WriteString("\n]}\n")
	return w.Flush()
}

// readJournal reads and checks the journal of id. A journal is data from
// disk: every path in it is checked again before Recover acts on it.
func readJournal(journalDir, id string) (*journal, error) {
	data, err := os.ReadFile(journalPath(journalDir, id))
	if err != nil {
		return nil, err
	}
	return decodeJournal(data, id)
}

// decodeJournal decodes and checks a journal that should belong to id.
func decodeJournal(data []byte, id string) (*journal, error) {
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("journal %s: %w", id, err)
	}
	bad := func(why string) error { return fmt.Errorf("journal %s: %s", id, why) }
	switch {
	case j.Version != journalVersion:
		return nil, bad("unknown version " + strconv.Itoa(j.Version))
	case j.ID != id:
		return nil, bad("names another change set")
	case j.State != statePrepared && j.State != stateCommitted:
		return nil, bad("unknown state " + strconv.Quote(j.State))
	case !filepath.IsAbs(j.Dir):
		return nil, bad("the workspace is not an absolute path")
	}
	for _, e := range j.Entries {
		if structuralPath(e.Path) != nil {
			return nil, bad("invalid path " + strconv.Quote(e.Path))
		}
		if !strings.HasPrefix(e.Temp, tempPrefix) || strings.ContainsAny(e.Temp, "/\x00") {
			return nil, bad("invalid temporary " + strconv.Quote(e.Temp))
		}
		if _, err := strconv.ParseUint(e.Backup, 10, 32); err != nil {
			return nil, bad("invalid backup name " + strconv.Quote(e.Backup))
		}
		switch e.Op {
		case OpCreate:
		case OpModify, OpDelete:
			if e.Old == nil {
				return nil, bad("no before-image for " + strconv.Quote(e.Path))
			}
		default:
			return nil, bad("unknown operation " + strconv.Quote(e.Op))
		}
	}
	for _, d := range j.Dirs {
		if structuralPath(d) != nil {
			return nil, bad("invalid directory " + strconv.Quote(d))
		}
	}
	return &j, nil
}

// finishJournal removes the backups and the journal of id, in that order, so
// that a crash in between leaves a journal that Recover can act on again.
func finishJournal(journalDir, id string, hook Hook) error {
	if err := hook.step("remove-backups"); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(journalDir, id)); err != nil {
		return err
	}
	if err := hook.step("remove-journal"); err != nil {
		return err
	}
	final := journalPath(journalDir, id)
	if err := removeIfExists(final + ".tmp"); err != nil {
		return err
	}
	if err := removeIfExists(final); err != nil {
		return err
	}
	if err := hook.step("sync-journal-dir"); err != nil {
		return err
	}
	return syncPath(journalDir)
}

// mkdirDurable creates the directory d if it is missing, durably.
func mkdirDurable(d string) error {
	if fi, err := os.Stat(d); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", d)
		}
		return nil
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	return syncPath(filepath.Dir(d))
}

// syncPath fsyncs the file or directory at p.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = syncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
