package node

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"

	"corral"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// cleanPath checks a workspace path given by a person with the one path
// validator (sanitize.Path): relative, slash-separated, clean, every
// element a valid name (dotfiles included). "" is the root.
func cleanPath(p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	return sanitize.Path(p)
}

// hidden says whether scope may not see p: secret files are the
// editors'; to anybody else they do not exist, in a listing or by name.
func hidden(scope corral.FileScope, p string) bool {
	return !scope.ShowSecrets && workspace.Secret(p, scope.Secrets)
}

// ReadFile returns the listing of a directory or the content of a file of
// the agent's persistent workspace.
func (l *Local) ReadFile(ctx context.Context, scope corral.FileScope, p string) ([]corral.FileInfo, []byte, error) {
	p, err := cleanPath(p)
	if err != nil {
		return nil, nil, err
	}
	if p != "." && hidden(scope, p) {
		return nil, nil, corral.NotFound("file")
	}
	dir, err := l.workspace(scope.AgentID)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, corral.Internal("read file", err)
	}
	defer root.Close()
	f, err := root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, corral.NotFound("file")
	}
	if err != nil {
		return nil, nil, corral.Errorf(corral.EINVALID, "path %q cannot be read", sanitize.Escape(p))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, corral.Internal("read file", err)
	}
	if fi.IsDir() {
		ents, err := f.ReadDir(-1)
		if err != nil {
			return nil, nil, corral.Internal("read dir", err)
		}
		list := make([]corral.FileInfo, 0, len(ents))
		for _, e := range ents {
			if hidden(scope, path.Join(p, e.Name())) {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			list = append(list, corral.FileInfo{Name: e.Name(), Dir: e.IsDir(), Size: info.Size()})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		return list, nil, nil
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, corral.Errorf(corral.EINVALID, "path %q is not a regular file", sanitize.Escape(p))
	}
	if fi.Size() > corral.MaxFile {
		return nil, nil, corral.Errorf(corral.ETOOLARGE, "file is larger than %d bytes", corral.MaxFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, corral.MaxFile+1))
	if err != nil {
		return nil, nil, corral.Internal("read file", err)
	}
	return nil, b, nil
}

// WriteFile writes one file into the agent's persistent workspace (an
// upload by an editor): atomically, owned by the sandbox's user, never
// through a symbolic link.
func (l *Local) WriteFile(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error) {
	p, err := cleanPath(w.Path)
	if err != nil {
		return corral.CommitResult{}, err
	}
	if p == "." {
		return corral.CommitResult{}, corral.Errorf(corral.EINVALID, "give the path of a file")
	}
	if len(w.Content) > corral.MaxFile {
		return corral.CommitResult{}, corral.Errorf(corral.ETOOLARGE, "file is larger than %d bytes", corral.MaxFile)
	}
	dir, err := l.workspace(w.AgentID)
	if err != nil {
		return corral.CommitResult{}, err
	}
	defer l.writers.Lock(w.AgentID)()
	// A run working on this workspace now must not later overwrite this
	// edit: its stage records what the run saw first.
	if err := l.keepBases(w.AgentID, []string{p}); err != nil {
		return corral.CommitResult{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return corral.CommitResult{}, corral.Internal("write file", err)
	}
	defer root.Close()
	if parent := path.Dir(p); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return corral.CommitResult{}, corral.Errorf(corral.EINVALID, "cannot create the directory of %q", sanitize.Escape(p))
		}
		if l.cfg.UID != 0 {
			for d := parent; d != "."; d = path.Dir(d) {
				if err := root.Lchown(d, l.cfg.UID, l.cfg.GID); err != nil {
					return corral.CommitResult{}, corral.Internal("write file", err)
				}
			}
		}
	}
	tmp := path.Join(path.Dir(p), ".corral-upload-"+corral.NewID("tmp"))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return corral.CommitResult{}, corral.Internal("write file", err)
	}
	_, werr := f.Write(w.Content)
	if werr == nil {
		werr = f.Sync()
	}
	if werr == nil && l.cfg.UID != 0 {
		werr = f.Chown(l.cfg.UID, l.cfg.GID)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, p)
	}
	if werr != nil {
		root.Remove(tmp)
		return corral.CommitResult{}, corral.Internal("write file", werr)
	}
	return l.commitLocked(w.AgentID, w.Commit, []string{p}), nil
}
