package node

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"corral"
	"corral/internal/gitrepo"
	"corral/internal/sanitize"
)

// A move carries a whole workspace from one node to another as a tar:
// directories, regular files and symbolic links with their modes, .git and
// the secret files included (they are the agent's as much as the rest).
// Anything else a workspace could hold (a socket, a FIFO) is left out.

// ExportWorkspace writes the agent's workspace as a tar. The agent's
// writers wait meanwhile, so the tar is one state of the workspace.
func (l *Local) ExportWorkspace(ctx context.Context, agentID string, w io.Writer) error {
	if err := sanitize.ID("agent", agentID); err != nil {
		return err
	}
	defer l.writers.Lock(agentID)()
	root := l.workspaceDir(agentID)
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return corral.Errorf(corral.ENOTFOUND, "this node holds no workspace of agent %s", agentID)
	}
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case d.IsDir(), d.Type().IsRegular():
		default:
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", "" // the importing node's own
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, h.Size); err != nil {
			return fmt.Errorf("%s changed while it was read: %w", h.Name, err)
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return corral.Internal("export workspace", err)
	}
	return nil
}

// ImportWorkspace makes the agent's workspace from an ExportWorkspace tar:
// it is extracted into DATA/moves/<agent>, through a root that no path or
// link in it can leave, and renamed over the empty workspace in one step,
// so a failed or cut-off move leaves nothing. The tree is bound like a
// clone (Git.MaxBytes). Its files go to the sandbox's user, but .git,
// which stays the server's, as after a clone.
func (l *Local) ImportWorkspace(ctx context.Context, agentID string, r io.Reader) error {
	if err := sanitize.ID("agent", agentID); err != nil {
		return err
	}
	if err := l.CanClone(ctx, agentID); err != nil {
		return corral.Errorf(corral.ECONFLICT, "the workspace cannot be moved here: %s", corral.ErrorMessage(err))
	}
	moves := l.movesDir()
	tmp := filepath.Join(moves, agentID)
	if err := os.MkdirAll(moves, 0o700); err != nil {
		return corral.Internal("import workspace", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return corral.Internal("import workspace", err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return corral.Internal("import workspace", err)
	}
	defer os.RemoveAll(tmp)
	if err := l.extract(ctx, tmp, r); err != nil {
		return err
	}
	// installClone: ownership, the check again under the lock, the rename.
	return l.installClone(agentID, tmp)
}

// extract writes the tar r under dir.
func (l *Local) extract(ctx context.Context, dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return corral.Internal("import workspace", err)
	}
	defer root.Close()
	limit := l.cfg.Git.MaxBytes
	if limit <= 0 {
		limit = gitrepo.DefaultMaxBytes
	}
	var total int64
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return corral.Errorf(corral.EINVALID, "the moved workspace is not a whole tar: %v", err)
		}
		name, ok := movedName(h.Name)
		if !ok {
			return corral.Errorf(corral.EINVALID, "the moved workspace holds the path %q, which would leave it", h.Name)
		}
		mode := fs.FileMode(h.Mode) & 0o777
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil && path.Dir(name) != "." {
			return corral.Errorf(corral.EINVALID, "the moved workspace's %s: %v", name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, mode|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return corral.Errorf(corral.EINVALID, "the moved workspace's %s: %v", name, err)
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return corral.Internal("import workspace", err)
			}
		case tar.TypeSymlink:
			// The link is made as it was; nothing is written through it.
			if err := root.Symlink(h.Linkname, name); err != nil {
				return corral.Errorf(corral.EINVALID, "the moved workspace's %s: %v", name, err)
			}
		case tar.TypeReg:
			if total += h.Size; total > limit {
				return corral.Errorf(corral.ETOOLARGE, "the moved workspace is over %d MiB, the most a clone may be here", limit>>20)
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
			if err != nil {
				return corral.Errorf(corral.EINVALID, "the moved workspace's %s: %v", name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return corral.Errorf(corral.EINVALID, "the moved workspace's %s was cut off: %v", name, err)
			}
			if err := root.Chmod(name, mode); err != nil {
				return corral.Internal("import workspace", err)
			}
		default:
			return corral.Errorf(corral.EINVALID, "the moved workspace's %s is neither a file, a directory nor a link", name)
		}
	}
}

// movedName is a tar entry's path inside the workspace, cleaned; false for
// one that is empty, absolute or climbs out.
func movedName(name string) (string, bool) {
	name = strings.TrimSuffix(name, "/")
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", false
	}
	clean := path.Clean(name)
	if clean != name || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}
