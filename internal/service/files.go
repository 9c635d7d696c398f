package service

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"

	"corral"
	"corral/internal/access"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// MaxFile bounds a file read or written through the API.
const MaxFile = 8 << 20

// FileInfo is one entry of a workspace directory listing.
type FileInfo struct {
	Name string
	Dir  bool
	Size int64
}

// cleanPath checks a workspace path given by a person with the one path
// validator (sanitize.Path): relative, slash-separated, clean, every
// element a valid name (dotfiles included). "" is the root.
func cleanPath(p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	return sanitize.Path(p)
}

// ReadFile returns the listing of a directory or the content of a file of
// the agent's persistent workspace. Symbolic links are never followed out
// of it.
func (c *Changes) ReadFile(ctx context.Context, actor corral.User, agentID, p string) ([]FileInfo, []byte, error) {
	a, err := c.loadAgent(ctx, actor, agentID, access.ReadFiles)
	if err != nil {
		return nil, nil, err
	}
	p, err = cleanPath(p)
	if err != nil {
		return nil, nil, err
	}
	// Secret files are the editors': to a viewer or runner they do not
	// exist, in a listing or by name.
	globs := append(slices.Clone(c.ws.Secrets), a.Policy.Secrets...)
	hidden := func(p string) bool {
		return access.Check(a.Access, access.ReadSecrets) != access.Allow && workspace.Secret(p, globs)
	}
	if p != "." && hidden(p) {
		return nil, nil, corral.NotFound("file")
	}
	dir, err := c.Workspace(agentID)
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
		return nil, nil, corral.Errorf(corral.EINVALID, "path %q cannot be read", p)
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
		list := make([]FileInfo, 0, len(ents))
		for _, e := range ents {
			if hidden(path.Join(p, e.Name())) {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue
			}
			list = append(list, FileInfo{Name: e.Name(), Dir: e.IsDir(), Size: info.Size()})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		return list, nil, nil
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, corral.Errorf(corral.EINVALID, "path %q is not a regular file", p)
	}
	if fi.Size() > MaxFile {
		return nil, nil, corral.Errorf(corral.ETOOLARGE, "file is larger than %d bytes", MaxFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, nil, corral.Internal("read file", err)
	}
	return nil, b, nil
}

// WriteFile writes one file into the agent's persistent workspace
// (an upload by an editor): atomically, owned by the sandbox's user, never
// through a symbolic link.
func (c *Changes) WriteFile(ctx context.Context, actor corral.User, agentID, p string, content []byte) error {
	if _, err := c.loadAgent(ctx, actor, agentID, access.WriteFiles); err != nil {
		return err
	}
	p, err := cleanPath(p)
	if err != nil {
		return err
	}
	if p == "." {
		return corral.Errorf(corral.EINVALID, "give the path of a file")
	}
	if len(content) > MaxFile {
		return corral.Errorf(corral.ETOOLARGE, "file is larger than %d bytes", MaxFile)
	}
	defer c.writers.lock(agentID)()
	dir, err := c.Workspace(agentID)
	if err != nil {
		return err
	}
	// A run working on this workspace now must not later overwrite this
	// edit: its stage records what the run saw first.
	if err := c.keepBases(agentID, []string{p}); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return corral.Internal("write file", err)
	}
	defer root.Close()
	if parent := path.Dir(p); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return corral.Errorf(corral.EINVALID, "cannot create the directory of %q", p)
		}
		if c.ws.UID != 0 {
			for d := parent; d != "."; d = path.Dir(d) {
				if err := root.Lchown(d, c.ws.UID, c.ws.GID); err != nil {
					return corral.Internal("write file", err)
				}
			}
		}
	}
	tmp := path.Join(path.Dir(p), ".corral-upload-"+corral.NewID("tmp"))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return corral.Internal("write file", err)
	}
	_, werr := f.Write(content)
	if werr == nil {
		werr = f.Sync()
	}
	if werr == nil && c.ws.UID != 0 {
		werr = f.Chown(c.ws.UID, c.ws.GID)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, p)
	}
	if werr != nil {
		root.Remove(tmp)
		return corral.Internal("write file", werr)
	}
	c.commitUpload(ctx, actor, agentID, "Upload "+p, []string{p}) // with a repository (repository.go)
	return nil
}

func (c *Changes) loadAgent(ctx context.Context, actor corral.User, id string, action access.Action) (corral.Agent, error) {
	a, err := c.store.Agent(ctx, id, actor.ID)
	if err != nil {
		return corral.Agent{}, err
	}
	if err := access.Check(a.Access, action).Err("agent", action); err != nil {
		return corral.Agent{}, err
	}
	return a, nil
}
