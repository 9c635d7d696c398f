package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"corral"
	"corral/internal/archive"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// importsDir (DATA/imports) holds the temporary trees and spooled
// archives of imports in progress: inside the data directory, so a
// rename-free copy stays on one file system, and private.

// Import extracts an archive (tar, tar.gz or zip, told by contentType or
// by its first bytes) into the agent's persistent workspace, all or
// nothing. The archive is read as a stream into a private temporary tree
// (a zip is spooled first: it needs random access), checked entry by entry
// (see archive.Extract), and only then applied in one workspace.Apply, so
// the journal, backups and rollback cover it as they cover a change set.
// The tree is private to this call and hashed as it was written, so Apply
// moves its files into place (workspace.MoveSource) instead of copying
// them a second time.
// An import creates and replaces files; it never deletes one (a file of
// the workspace the archive lacks stays). A run working on the workspace
// meanwhile is told (keepBases): approving its change set later conflicts
// on what the import changed.
func (l *Local) Import(ctx context.Context, agentID, contentType string, body io.Reader, commit *corral.CommitSpec) (corral.ImportResult, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.ImportResult{}, err
	}
	format, body := archive.Sniff(contentType, body)
	if format == "" {
		return corral.ImportResult{}, corral.Errorf(corral.EINVALID, "the body is not a tar, tar.gz or zip archive (say so with Content-Type application/x-tar, application/gzip or application/zip)")
	}
	if err := os.MkdirAll(l.importsDir(), 0o700); err != nil {
		return corral.ImportResult{}, corral.Internal("import", err)
	}
	id := corral.NewID("imp")
	tmp := filepath.Join(l.importsDir(), id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return corral.ImportResult{}, corral.Internal("import", err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return corral.ImportResult{}, corral.Internal("import", err)
	}
	res, err := archive.Extract(body, format, tree, tmp, l.cfg.Imports)
	if err != nil {
		return corral.ImportResult{}, err
	}
	for _, f := range res.Files {
		if err := importable(f.Path); err != nil {
			return corral.ImportResult{}, err
		}
	}
	out := corral.ImportResult{Files: len(res.Files), Bytes: res.Bytes}
	if len(res.Files) == 0 {
		return out, nil
	}

	dir, err := l.workspace(agentID)
	if err != nil {
		return corral.ImportResult{}, err
	}
	defer l.writers.Lock(agentID)()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return corral.ImportResult{}, corral.Internal("import", err)
	}
	defer root.Close()
	// Into an empty workspace (a new agent's) every file is a create: no
	// need to look for each one.
	empty, err := emptyDir(dir)
	if err != nil {
		return corral.ImportResult{}, err
	}
	entries := make([]workspace.Entry, 0, len(res.Files))
	paths := make([]string, 0, len(res.Files))
	for _, f := range res.Files {
		e := workspace.Entry{Path: f.Path, Op: workspace.OpCreate, NewSHA256: f.SHA256, Size: f.Size, Mode: f.Mode, Class: workspace.ClassOrdinary}
		if empty {
			entries = append(entries, e)
			paths = append(paths, f.Path)
			continue
		}
		old, oldMode, err := hashFile(root, f.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			// A create; a file where a directory of it should be is
			// Apply's conflict to report.
		case err != nil:
			return corral.ImportResult{}, err
		case old == f.SHA256 && oldMode.Perm() == f.Mode:
			continue // already there as it is
		default:
			e.Op, e.OldSHA256, e.OldMode = workspace.OpModify, old, oldMode
		}
		entries = append(entries, e)
		paths = append(paths, f.Path)
	}
	if len(entries) == 0 {
		return out, nil
	}
	if err := l.keepBases(agentID, paths); err != nil {
		return corral.ImportResult{}, err
	}
	if err := workspace.Apply(dir, l.journalDir(agentID), id, entries, workspace.MoveSource(tree), nil); err != nil {
		return corral.ImportResult{}, err
	}
	out.Changed = len(entries)
	l.cfg.Log.Info("archive imported", "agent", agentID, "files", out.Files, "bytes", out.Bytes, "changed", out.Changed)
	out.Commit = l.commitLocked(agentID, commit, paths)
	return out, nil
}

// emptyDir says whether dir has no entry at all. (Apply checks again that
// each create's path is absent: a file that appeared meanwhile is its
// conflict to report.)
func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, corral.Internal("import", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	if err != nil {
		return false, corral.Internal("import", err)
	}
	return len(names) == 0, nil
}

// importable refuses the paths Corral keeps for itself: .corral at the root
// (its own files) and the names of its temporaries.
func importable(p string) error {
	first, _, _ := strings.Cut(p, "/")
	base := path.Base(p)
	if sanitize.Fold(first) == ".corral" || strings.HasPrefix(base, ".corral-tmp-") || strings.HasPrefix(base, ".corral-upload-") {
		return corral.Errorf(corral.ENAME, "archive entry %q is a name Corral keeps for itself; nothing was imported", sanitize.Escape(p))
	}
	return nil
}

// hashFile returns the SHA-256 and mode of the regular file p of root,
// without following a link at p. fs.ErrNotExist when there is none; a
// conflict when p is a directory, a link or another kind of file.
func hashFile(root *os.Root, p string) (string, fs.FileMode, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return "", 0, corral.Errorf(corral.ECONFLICT, "%q is a symbolic link in the workspace; Corral never follows or replaces links", sanitize.Escape(p))
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		// A directory on the way may be a link (os.Root refuses one that
		// leads out): said as workspace.Apply says it, not an internal error.
		if dir, ok := linkOnTheWay(root, p); ok {
			return "", 0, corral.Errorf(corral.EINVALID, "path %q passes through a symbolic link in the workspace (%q); Corral never follows links", sanitize.Escape(p), sanitize.Escape(dir))
		}
		return "", 0, corral.Internal("hash file", err)
	}
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, corral.Internal("hash file", err)
	}
	if fi.IsDir() {
		return "", 0, corral.Errorf(corral.ECONFLICT, "%q is a directory in the workspace", sanitize.Escape(p))
	}
	if !fi.Mode().IsRegular() {
		return "", 0, corral.Errorf(corral.ECONFLICT, "%q is not a regular file in the workspace", sanitize.Escape(p))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", 0, corral.Internal("hash file", err)
	}
	return hex.EncodeToString(h.Sum(nil)), fi.Mode(), nil
}

// linkOnTheWay finds the first directory of p (a clean relative path) that
// is a symbolic link in root.
func linkOnTheWay(root *os.Root, p string) (string, bool) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if fi, err := root.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return dir, true
		}
	}
	return "", false
}

// DeleteFile deletes a file of the agent's persistent workspace, or a
// directory and everything in it when recursive is true (a directory
// without it is a conflict saying so). The files go through
// workspace.Apply as deletes, so the journal covers them; the directories
// left empty under p (and p itself, for a directory) are removed after.
// Links are never followed nor deleted: a link at p or under it makes the
// delete a conflict naming it, and nothing is deleted.
func (l *Local) DeleteFile(ctx context.Context, agentID, p string, recursive bool, commit *corral.CommitSpec) (res corral.DeleteResult, err error) {
	p, err = cleanPath(p)
	if err != nil {
		return res, err
	}
	if p == "." {
		return res, corral.Errorf(corral.EINVALID, "give the path of a file or a directory")
	}
	dir, err := l.workspace(agentID)
	if err != nil {
		return res, err
	}
	defer l.writers.Lock(agentID)()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, corral.Internal("delete file", err)
	}
	defer root.Close()
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return res, corral.NotFound("file")
	}
	if err != nil {
		return res, corral.Errorf(corral.EINVALID, "path %q cannot be read", sanitize.Escape(p))
	}
	var entries []workspace.Entry
	var dirs []string
	add := func(q string) error {
		sum, mode, err := hashFile(root, q)
		if err != nil {
			var ce *corral.Error
			if !errors.As(err, &ce) {
				return corral.Internal("delete file", err)
			}
			return err
		}
		entries = append(entries, workspace.Entry{Path: q, Op: workspace.OpDelete, OldSHA256: sum, OldMode: mode, Class: workspace.ClassOrdinary})
		return nil
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return res, corral.Errorf(corral.ECONFLICT, "%q is a symbolic link; Corral never follows or deletes links", sanitize.Escape(p))
	case fi.IsDir() && !recursive:
		return res, corral.Errorf(corral.ECONFLICT, "%q is a directory: delete it with recursive=true", sanitize.Escape(p))
	case fi.IsDir():
		err := fs.WalkDir(root.FS(), p, func(q string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return corral.Internal("delete file", err)
			case d.IsDir():
				dirs = append(dirs, q)
				return nil
			case d.Type().IsRegular():
				return add(q)
			}
			return corral.Errorf(corral.ECONFLICT, "%q holds %q, which is not a regular file (Corral never follows or deletes links); nothing was deleted", sanitize.Escape(p), sanitize.Escape(q))
		})
		if err != nil {
			return res, err
		}
	case fi.Mode().IsRegular():
		if err := add(p); err != nil {
			return res, err
		}
	default:
		return res, corral.Errorf(corral.ECONFLICT, "%q is not a regular file or a directory", sanitize.Escape(p))
	}
	if len(entries) > 0 {
		paths := make([]string, len(entries))
		for i, e := range entries {
			paths[i] = e.Path
		}
		if err := l.keepBases(agentID, paths); err != nil {
			return res, err
		}
		if err := workspace.Apply(dir, l.journalDir(agentID), corral.NewID("del"), entries, nil, nil); err != nil {
			return res, err
		}
		res.Commit = l.commitLocked(agentID, commit, paths)
	}
	// Deepest first: WalkDir listed each directory before what it holds.
	for _, d := range slices.Backward(dirs) {
		if err := root.Remove(d); err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return res, corral.Internal("delete file", err)
		}
	}
	res.Files, res.Dirs = len(entries), len(dirs)
	l.cfg.Log.Info("workspace path deleted", "agent", agentID, "files", res.Files, "directories", res.Dirs)
	return res, nil
}

// Archive writes the agent's persistent workspace, as scope may see it, as
// a tar.gz. What goes in: regular files and directories, never a link
// (links are skipped, not stored, so the archive can be imported again);
// no path the validator refuses (.git and its look-alikes: import would
// refuse them); no temporary of Corral's; secret files only for a scope
// that shows them. The archive is read from the live workspace without
// holding its writers lock, so a long download never stalls an apply:
// each file is whole (applies replace files by rename), but files changed
// during the download may come from either side of it.
func (l *Local) Archive(ctx context.Context, scope corral.FileScope, w io.Writer) error {
	dir, err := l.workspace(scope.AgentID)
	if err != nil {
		return err
	}
	keep := func(p string, isDir bool) bool {
		if rule, _ := sanitize.StoredPath(p); rule != "" {
			return false
		}
		base := path.Base(p)
		if strings.HasPrefix(base, ".corral-tmp-") || strings.HasPrefix(base, ".corral-upload-") {
			return false
		}
		return !hidden(scope, p)
	}
	if err := archive.Write(w, dir, keep); err != nil {
		return fmt.Errorf("archive workspace: %w", err)
	}
	return nil
}
