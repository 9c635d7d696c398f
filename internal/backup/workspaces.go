package backup

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// workspaces copies the workspace of every agent in the database snapshot
// that has one on this machine (with split roles, workspaces live on the
// sandbox nodes, and control's backup holds none).
func (t *taker) workspaces(ctx context.Context, agents []string) error {
	for _, id := range agents {
		dir := filepath.Join(t.opt.Data, workspacesDir, id)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := t.workspace(ctx, id); err != nil {
			return fmt.Errorf("workspace of agent %s: %w", id, err)
		}
	}
	return nil
}

// workspace copies one agent's workspace so that no apply is caught
// halfway. An apply writes its journal (journals/<agent>/<id>.json) before
// it touches the workspace and removes it once done, so the copy is taken
// while the agent's journal directory holds no journal, and it counts only
// if that directory did not change while the copy was taken; else it is
// taken again, until opt.ApplyWait has passed. The copy goes to a tar of
// its own first, and into the archive once it counts.
func (t *taker) workspace(ctx context.Context, agentID string) error {
	name := workspacesDir + "/" + agentID
	dir := filepath.Join(t.opt.Data, workspacesDir, agentID)
	journal := filepath.Join(t.opt.Data, journalsDir, agentID)
	seg := filepath.Join(t.tmp, "workspace.tar")
	deadline := t.opt.Now().Add(t.opt.ApplyWait)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		before, busy, err := stamp(journal)
		if err != nil {
			return err
		}
		if !busy {
			c, err := copyTree(seg, dir, name)
			switch {
			case errors.Is(err, fs.ErrNotExist) && missing(dir):
				return nil // the agent was deleted while the backup ran
			case err != nil && !errors.Is(err, errChanged):
				return err
			case err == nil:
				if copiedHook != nil {
					copiedHook(agentID)
				}
				after, _, err := stamp(journal)
				if err != nil {
					return err
				}
				if after == before {
					return t.addWorkspace(name, seg, c)
				}
			}
		}
		if t.opt.Now().After(deadline) {
			return fmt.Errorf("applies kept changing it for %s (or one was left unfinished: start corral serve once so it finishes or rolls back)", t.opt.ApplyWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copiedHook, when set (by tests), runs after each copy of a workspace
// and before the second look at its journal.
var copiedHook func(agentID string)

func (t *taker) addWorkspace(name, seg string, c treeCopy) error {
	if err := t.w.parents(t.opt.Data, name); err != nil {
		return err
	}
	if err := t.w.merge(seg, c.entries); err != nil {
		return err
	}
	t.m.Holds.Workspaces++
	t.m.Holds.WorkspaceFiles += c.files
	t.m.Holds.WorkspaceBytes += c.bytes
	t.m.Holds.Skipped += c.skipped
	t.progress.step("%s copied (%d files, %s)", name, c.files, Size(c.bytes))
	return nil
}

func missing(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// stamp describes an agent's journal directory: every entry under it with
// its size and modification time, and the directory's own. Any entry at
// all is an apply in progress (busy).
func stamp(dir string) (string, bool, error) {
	var b strings.Builder
	busy := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if p != dir {
			busy = true
		}
		fmt.Fprintf(&b, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		if missing(dir) {
			return "absent", false, nil
		}
		return "", true, nil // an entry went while it was read: an apply ends
	}
	return b.String(), busy, err
}

// treeCopy is what copyTree wrote.
type treeCopy struct {
	entries               []Entry
	files, bytes, skipped int64
}

// copyTree writes the tree at dir, named name, into a new tar at seg:
// directories, regular files (a hard link as a file of its own) and
// symbolic links, as they are (never followed), with their owners, modes
// and times. Devices, FIFOs and sockets are skipped and counted.
func copyTree(seg, dir, name string) (treeCopy, error) {
	var c treeCopy
	f, err := os.Create(seg)
	if err != nil {
		return c, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: path.Join(name, filepath.ToSlash(rel)), Mode: int64(fi.Mode().Perm()) | tarModeBits(fi.Mode()),
			ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		var e Entry
		switch {
		case fi.IsDir():
			hdr.Typeflag = tar.TypeDir
			e, err = writeEntry(tw, hdr, nil)
		case fi.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			e, err = writeEntry(tw, hdr, nil)
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
			var src *os.File
			if src, err = os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err != nil {
				return err
			}
			e, err = writeEntry(tw, hdr, src)
			if err == nil && changed(src, fi) {
				err = fmt.Errorf("%s: %w", hdr.Name, errChanged)
			}
			src.Close()
			c.files++
			c.bytes += hdr.Size
		default:
			c.skipped++
			return nil
		}
		if err != nil {
			return err
		}
		c.entries = append(c.entries, e)
		return nil
	})
	if err != nil {
		return treeCopy{}, err
	}
	if err := tw.Close(); err != nil {
		return treeCopy{}, err
	}
	return c, f.Close()
}

// tarModeBits are the set-id and sticky bits of m as tar writes them.
func tarModeBits(m fs.FileMode) int64 {
	var bits int64
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

// changed reports whether the open file f is no longer as fi saw it
// before it was copied.
func changed(f *os.File, fi fs.FileInfo) bool {
	now, err := f.Stat()
	return err != nil || now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime())
}
