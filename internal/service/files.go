package service

import (
	"context"
	"io"

	"corral"
	"corral/internal/access"
	"corral/internal/sanitize"
)

// Files are what people do with an agent's persistent workspace: read,
// write, import, delete, export. With a repository, each write is a
// commit.
type Files struct {
	store agentReader
	trees corral.Trees
	repos *Repositories
}

// NewFiles returns the workspace's file use cases.
func NewFiles(store agentReader, trees corral.Trees, repos *Repositories) *Files {
	return &Files{store: store, trees: trees, repos: repos}
}

// scope is what actor may see of agent a's workspace: secret files are
// the editors'; to a viewer or runner they do not exist.
func scope(a corral.Agent) corral.FileScope {
	return corral.FileScope{AgentID: a.ID, Name: a.Name, Secrets: a.Policy.Secrets,
		ShowSecrets: access.Check(a.Access, access.ReadSecrets) == access.Allow}
}

// ReadFile returns the listing of a directory or the content of a file of
// the agent's persistent workspace. Symbolic links are never followed out
// of it.
func (c *Files) ReadFile(ctx context.Context, actor corral.User, agentID, p string) ([]corral.FileInfo, []byte, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.ReadFiles)
	if err != nil {
		return nil, nil, err
	}
	return c.trees.ReadFile(ctx, scope(a), p)
}

// WriteFile writes one file into the agent's persistent workspace
// (an upload by an editor): atomically, owned by the sandbox's user, never
// through a symbolic link. A run working on the workspace meanwhile can
// never overwrite it: approving its change set conflicts instead.
func (c *Files) WriteFile(ctx context.Context, actor corral.User, agentID, p string, content []byte) error {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return err
	}
	commit, repo := c.repos.uploadCommit(ctx, actor, a, "Upload "+p)
	res, err := c.trees.WriteFile(ctx, corral.FileWrite{AgentID: a.ID, Path: p, Content: content, Commit: commit})
	if err != nil {
		return err
	}
	c.repos.recordCommit(ctx, repo, res)
	return nil
}

// Import extracts an archive (tar, tar.gz or zip, told by contentType or
// by its first bytes) into the agent's persistent workspace, all or
// nothing, each entry checked (see archive.Extract) before anything is
// written. It creates and replaces files; it never deletes one. A run
// working on the workspace meanwhile is told: approving its change set
// later conflicts on what the import changed.
func (c *Files) Import(ctx context.Context, actor corral.User, agentID, contentType string, body io.Reader) (corral.ImportResult, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return corral.ImportResult{}, err
	}
	commit, repo := c.repos.uploadCommit(ctx, actor, a, "Import an archive")
	res, err := c.trees.Import(ctx, a.ID, contentType, body, commit)
	if err != nil {
		return corral.ImportResult{}, err
	}
	c.repos.recordCommit(ctx, repo, res.Commit)
	return res, nil
}

// DeleteFile deletes a file of the agent's persistent workspace, or a
// directory and everything in it when recursive is true (a directory
// without it is a conflict saying so). The journal covers it like an
// apply. Links are never followed nor deleted: a link at p or under it
// makes the delete a conflict naming it, and nothing is deleted.
func (c *Files) DeleteFile(ctx context.Context, actor corral.User, agentID, p string, recursive bool) error {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return err
	}
	commit, repo := c.repos.uploadCommit(ctx, actor, a, "Delete "+p)
	res, err := c.trees.DeleteFile(ctx, a.ID, p, recursive, commit)
	if err != nil {
		return err
	}
	c.repos.recordCommit(ctx, repo, res.Commit)
	return nil
}

// WorkspaceArchive is a download of an agent's persistent workspace, made
// when written.
type WorkspaceArchive struct {
	Name  string // the file name to offer: the agent's name and .tar.gz
	trees corral.Trees
	scope corral.FileScope
}

// Archive prepares the download of the agent's persistent workspace as a
// tar.gz: regular files and directories, never a link, no temporary of
// Corral's, secret files only for a caller who may read them (editors and
// owners). See corral.Trees.Archive.
func (c *Files) Archive(ctx context.Context, actor corral.User, agentID string) (*WorkspaceArchive, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.ReadFiles)
	if err != nil {
		return nil, err
	}
	return &WorkspaceArchive{Name: a.Name + ".tar.gz", trees: c.trees, scope: scope(a)}, nil
}

// Write streams the archive to w.
func (wa *WorkspaceArchive) Write(ctx context.Context, w io.Writer) error {
	return wa.trees.Archive(ctx, wa.scope, w)
}

// EscapePath is how a workspace path is shown to people: exactly its bytes,
// every control, invisible or invalid one escaped (sanitize.Escape).
func EscapePath(p string) string { return sanitize.Escape(p) }
