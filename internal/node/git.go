package node

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"corral"
	"corral/internal/gitrepo"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// auth is the git credential of one operation.
func auth(a *corral.GitAuth) *gitrepo.Auth {
	if a == nil {
		return nil
	}
	return &gitrepo.Auth{Username: a.Username, Secret: a.Secret}
}

// CanClone says whether a clone may land in the agent's workspace now: it
// must be empty, and no run may be working on it (its stage would not
// know of the files).
func (l *Local) CanClone(ctx context.Context, agentID string) error {
	if err := sanitize.ID("agent", agentID); err != nil {
		return err
	}
	defer l.writers.Lock(agentID)()
	return l.canCloneLocked(agentID)
}

func (l *Local) canCloneLocked(agentID string) error {
	if l.busy(agentID) {
		return corral.Errorf(corral.ECONFLICT, "a run is working on the workspace: clone when it has ended")
	}
	dir, err := l.workspace(agentID)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return corral.Internal("clone", err)
	}
	if len(ents) > 0 {
		return corral.Errorf(corral.ECONFLICT, "the workspace is not empty: a repository is cloned only into an empty workspace")
	}
	return nil
}

// Clone clones into DATA/clones/<agent>, then moves the result into the
// workspace in one rename: a failure (or a cancelled ctx) leaves nothing
// of it on disk.
func (l *Local) Clone(ctx context.Context, agentID string, spec corral.CloneSpec, progress func(int)) (corral.CloneResult, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.CloneResult{}, err
	}
	tmp := filepath.Join(l.clonesDir(), agentID)
	err := os.MkdirAll(l.clonesDir(), 0o700)
	if err == nil {
		err = os.RemoveAll(tmp)
	}
	if err != nil {
		return corral.CloneResult{}, corral.Internal("clone", err)
	}
	defer os.RemoveAll(tmp)
	if err := l.cfg.Git.Clone(ctx, spec.URL, spec.Ref, auth(spec.Auth), tmp, progress); err != nil {
		return corral.CloneResult{}, err
	}
	if err := l.installClone(agentID, tmp); err != nil {
		return corral.CloneResult{}, err
	}
	// What a person reads about the clone is worth a moment more than a
	// stopping server.
	rec := context.WithoutCancel(ctx)
	ws := l.workspaceDir(agentID)
	head, _ := l.cfg.Git.Head(rec, ws)
	return corral.CloneResult{Head: head, Branch: l.cfg.Git.Branch(rec, ws)}, nil
}

// installClone gives the clone's tree to the sandbox's user (but .git,
// which stays the server's: runs may read it, never write it) and renames
// it over the empty workspace.
func (l *Local) installClone(agentID, tmp string) error {
	defer l.writers.Lock(agentID)()
	if err := l.canCloneLocked(agentID); err != nil {
		return err
	}
	if err := l.giveTree(tmp); err != nil {
		return err
	}
	// rename(2) replaces an empty directory: the workspace is the clone or
	// stays empty, never half of it. (os.Rename refuses any existing
	// directory, so the system call is made directly.)
	if err := syscall.Rename(tmp, l.workspaceDir(agentID)); err != nil {
		return corral.Internal("clone", err)
	}
	return nil
}

// Commit commits paths of the agent's workspace.
func (l *Local) Commit(ctx context.Context, agentID string, spec corral.CommitSpec) (corral.CommitResult, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.CommitResult{}, err
	}
	defer l.writers.Lock(agentID)()
	return l.commitLocked(agentID, &spec, nil), nil
}

// commitLocked commits paths (and spec.Paths) of the agent's workspace
// when spec is set; the caller holds the agent's writers lock and has just
// written paths. Secret files (.env and the like) are never committed: a
// push would carry them off the machine. A failure is logged and answered:
// the files are written either way, and the next commit includes them.
func (l *Local) commitLocked(agentID string, spec *corral.CommitSpec, paths []string) corral.CommitResult {
	if spec == nil {
		return corral.CommitResult{}
	}
	var keep []string
	for _, p := range append(slices.Clone(spec.Paths), paths...) {
		if !workspace.Secret(p, spec.Secrets) && !slices.Contains(keep, p) {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return corral.CommitResult{}
	}
	who := gitrepo.Identity{Name: spec.Author.Name, Email: spec.Author.Email}
	if who.Name == "" {
		who = l.cfg.Git.CommitterIdentity()
	}
	// Not the caller's context: the files are written whether or not the
	// caller is still there, and the commit belongs with them.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sha, err := l.cfg.Git.Commit(ctx, l.workspaceDir(agentID), who, spec.Message, keep)
	if err != nil {
		l.cfg.Log.Warn("commit failed; the files are written and the next commit includes them", "agent", agentID, "err", err)
		return corral.CommitResult{Made: true, Failed: true, Paths: keep}
	}
	return corral.CommitResult{Made: true, SHA: sha, Paths: keep}
}

// Log lists the newest n commits of the workspace's repository.
func (l *Local) Log(ctx context.Context, agentID string, n int) ([]corral.GitCommit, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return nil, err
	}
	log, err := l.cfg.Git.Log(ctx, l.workspaceDir(agentID), n)
	if err != nil {
		return nil, err
	}
	out := make([]corral.GitCommit, 0, len(log))
	for _, cm := range log {
		out = append(out, corral.GitCommit{SHA: cm.SHA, Author: corral.Identity{Name: cm.Author.Name, Email: cm.Author.Email},
			CommittedAt: cm.CommittedAt, Message: cm.Message})
	}
	return out, nil
}

// Push pushes the repository's HEAD to branch of url, a fast-forward only.
func (l *Local) Push(ctx context.Context, agentID, url, branch string, a *corral.GitAuth) (corral.PushResult, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.PushResult{}, err
	}
	res, err := l.cfg.Git.Push(ctx, l.workspaceDir(agentID), url, branch, auth(a))
	if err != nil {
		return corral.PushResult{}, err
	}
	return corral.PushResult{Branch: res.Branch, Head: res.Head, Commits: res.Commits}, nil
}

// giveTree gives a repository's tree to the sandbox's user, but .git,
// which stays the server's: runs may read it, never write it.
func (l *Local) giveTree(dir string) error {
	if l.cfg.UID == 0 {
		return nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == filepath.Join(dir, ".git") {
			return filepath.SkipDir
		}
		return os.Lchown(p, l.cfg.UID, l.cfg.GID)
	})
	if err != nil {
		return corral.Internal("git", err)
	}
	return nil
}

// Sync fetches the remote's branch, then, under the agent's writers lock
// and with no run working on the workspace, brings the workspace to it
// (gitrepo.Config.Rebase): the fetch touches only .git, so it runs
// outside the lock. What git wrote is given to the sandbox's user.
func (l *Local) Sync(ctx context.Context, agentID string, spec corral.CloneSpec) (corral.SyncResult, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.SyncResult{}, err
	}
	ws := l.workspaceDir(agentID)
	upstream, err := l.cfg.Git.Fetch(ctx, ws, spec.URL, spec.Ref, auth(spec.Auth))
	if err != nil {
		return corral.SyncResult{}, err
	}
	defer l.writers.Lock(agentID)()
	if l.busy(agentID) {
		return corral.SyncResult{}, corral.Errorf(corral.ECONFLICT, "a run is working on the workspace: sync when it has ended")
	}
	// Not the caller's context from here: a rebase stopped half way would
	// be undone, but it is short, and its outcome belongs together.
	res, err := l.cfg.Git.Rebase(context.WithoutCancel(ctx), ws, upstream)
	if err != nil {
		return corral.SyncResult{}, err
	}
	if res.Status != gitrepo.SyncUpToDate {
		if err := l.giveTree(ws); err != nil {
			return corral.SyncResult{}, err
		}
	}
	return corral.SyncResult{Head: res.Head, Upstream: res.Upstream, FastForward: res.Status != gitrepo.SyncRebased,
		Rebased: res.Rebased, Status: res.Status}, nil
}
