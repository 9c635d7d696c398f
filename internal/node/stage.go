package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"corral"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// workspace returns the agent's persistent workspace, creating it (owned
// by the sandbox's user) on first use.
func (l *Local) workspace(agentID string) (string, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return "", err
	}
	dir := l.workspaceDir(agentID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", corral.Internal("workspace", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", corral.Internal("workspace", err)
	}
	if l.cfg.UID != 0 {
		if err := os.Lchown(dir, l.cfg.UID, l.cfg.GID); err != nil {
			return "", corral.Internal("workspace", err)
		}
	}
	return dir, nil
}

func (l *Local) stageOptions() workspace.StageOptions {
	return workspace.StageOptions{UID: l.cfg.UID, GID: l.cfg.GID, NoOverlay: l.cfg.NoOverlay}
}

// Stage stages the agent's workspace as the tree spec.ID.
func (l *Local) Stage(ctx context.Context, spec corral.StageSpec) error {
	if err := sanitize.ID("stage", spec.ID); err != nil {
		return err
	}
	dir, err := l.workspace(spec.AgentID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.stagesDir(), 0o711); err != nil {
		return corral.Internal("stage", err)
	}
	opt := l.stageOptions()
	opt.Secrets = spec.Secrets
	opt.DiskBytes, opt.DiskInodes = spec.DiskBytes, spec.DiskInodes
	// Under the writers lock: from the moment the tree is staged, every
	// change to the workspace is told to it.
	defer l.writers.Lock(spec.AgentID)()
	st, err := workspace.NewStage(dir, l.stageDir(spec.ID), opt)
	if err != nil {
		return err
	}
	l.track(spec.AgentID, spec.ID, st)
	return nil
}

// ReopenStage opens a staged tree an earlier process or a paused run left.
func (l *Local) ReopenStage(ctx context.Context, agentID, id string) error {
	if err := errors.Join(sanitize.ID("agent", agentID), sanitize.ID("stage", id)); err != nil {
		return err
	}
	defer l.writers.Lock(agentID)()
	if l.stage(id) != nil {
		return nil // open already
	}
	st, err := workspace.OpenStage(l.workspaceDir(agentID), l.stageDir(id), l.stageOptions())
	if err != nil {
		return err
	}
	l.track(agentID, id, st)
	return nil
}

// openStage is the stage id, open or re-opened from disk: a stage whose
// manifest is taken stays on disk, not in memory, until it is discarded.
func (l *Local) openStage(agentID, id string) (*workspace.Stage, error) {
	if err := errors.Join(sanitize.ID("agent", agentID), sanitize.ID("stage", id)); err != nil {
		return nil, err
	}
	if st := l.stage(id); st != nil {
		return st, nil
	}
	return workspace.OpenStage(l.workspaceDir(agentID), l.stageDir(id), l.stageOptions())
}

// stage is the open stage id, nil if it is not open.
func (l *Local) stage(id string) *workspace.Stage {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, stages := range l.open {
		if st := stages[id]; st != nil {
			return st
		}
	}
	return nil
}

// tree is the host directory of the open stage id, for its session.
func (l *Local) tree(id string) (string, error) {
	st := l.stage(id)
	if st == nil {
		return "", corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	return st.Tree(), nil
}

// diskFull reports whether the open stage id has used up its own disk.
func (l *Local) diskFull(id string) (bool, error) {
	st := l.stage(id)
	if st == nil {
		return false, corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	return st.DiskFull()
}

func (l *Local) track(agentID, id string, st *workspace.Stage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[agentID] == nil {
		l.open[agentID] = map[string]*workspace.Stage{}
	}
	l.open[agentID][id] = st
}

func (l *Local) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for agentID, stages := range l.open {
		delete(stages, id)
		if len(stages) == 0 {
			delete(l.open, agentID)
		}
	}
}

// busy says whether a run works on the agent's workspace now.
func (l *Local) busy(agentID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open[agentID]) > 0
}

// keepBases tells every open stage of the agent what paths hold before the
// caller changes them (see workspace.Stage.KeepBases), so that approving a
// run's change set can never overwrite an edit made while it worked. The
// caller holds the agent's writers lock. A stage that cannot record it
// makes the write fail: the change would otherwise go undetected.
func (l *Local) keepBases(agentID string, paths []string) error {
	l.mu.Lock()
	stages := make([]*workspace.Stage, 0, len(l.open[agentID]))
	for _, st := range l.open[agentID] {
		stages = append(stages, st)
	}
	l.mu.Unlock()
	for _, st := range stages {
		if err := st.KeepBases(paths); err != nil {
			return corral.Internal("keep bases", err)
		}
	}
	return nil
}

// Manifest measures, classifies and diffs what a run changed in its tree.
// A stage that cannot be measured is removed: nothing could apply it.
func (l *Local) Manifest(ctx context.Context, agentID, id string, policy corral.ClassPolicy) (corral.StageManifest, error) {
	if err := sanitize.ID("agent", agentID); err != nil {
		return corral.StageManifest{}, err
	}
	defer l.writers.Lock(agentID)()
	st := l.stage(id)
	if st == nil {
		return corral.StageManifest{}, corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	m, err := st.Manifest()
	l.forget(id)
	if err != nil {
		st.Close()
		return corral.StageManifest{}, err
	}
	m = workspace.ClassifyAll(m, workspace.ClassPolicy{Protected: policy.Protected, Risky: policy.Risky})
	out := corral.StageManifest{Entries: make([]corral.ChangeEntry, 0, len(m))}
	for _, e := range m {
		out.Entries = append(out.Entries, corral.ChangeEntry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: uint32(e.Mode), OldMode: uint32(e.OldMode), Class: e.Class, Flags: e.Flags, Note: e.Note,
		})
	}
	addDiffs(out.Entries, workspace.DirSource(l.workspaceDir(agentID)), st.Source())
	out.DiskBytes, _ = st.DiskUsage()
	return out, nil
}

// Diffs makes entries' diffs from a staged tree still on disk.
func (l *Local) Diffs(ctx context.Context, agentID, id string, entries []corral.ChangeEntry) ([]corral.ChangeEntry, error) {
	st, err := l.openStage(agentID, id)
	if err != nil {
		return nil, err
	}
	out := append([]corral.ChangeEntry(nil), entries...)
	addDiffs(out, workspace.DirSource(l.workspaceDir(agentID)), st.Source())
	return out, nil
}

// Apply writes entries of a staged tree into the workspace, all or
// nothing. First every base is checked: when a file changed in the
// workspace since the run saw it, nothing is applied and the conflicts are
// named. A failure rolls back. The other open stages of the agent hear of
// the change before it is made; the commit, when asked for, is made under
// the same lock, so it holds exactly what was applied.
func (l *Local) Apply(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
	if len(req.Entries) == 0 {
		return corral.ApplyResult{}, nil
	}
	defer l.writers.Lock(req.AgentID)()
	st, err := l.openStage(req.AgentID, req.StageID)
	if err != nil {
		return corral.ApplyResult{}, err
	}
	entries := make([]workspace.Entry, len(req.Entries))
	paths := make([]string, len(req.Entries))
	for i, e := range req.Entries {
		entries[i] = workspace.Entry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: fs.FileMode(e.Mode), OldMode: fs.FileMode(e.OldMode), Flags: e.Flags, Class: e.Class,
		}
		paths[i] = e.Path
	}
	dir := l.workspaceDir(req.AgentID)
	conflicts, err := workspace.Conflicts(dir, entries)
	if err != nil {
		return corral.ApplyResult{}, err
	}
	if len(conflicts) == 0 {
		if err = l.keepBases(req.AgentID, paths); err != nil {
			return corral.ApplyResult{}, err
		}
		err = workspace.Apply(dir, l.journalDir(req.AgentID), req.ID, entries, st.Source(), nil)
		if corral.ErrorCode(err) == corral.ECONFLICT {
			for _, p := range paths {
				conflicts[p] = err
			}
		}
	}
	if len(conflicts) > 0 {
		res := corral.ApplyResult{Conflicts: map[string]string{}}
		var why []string
		for p, cerr := range conflicts {
			res.Conflicts[p] = corral.ErrorMessage(cerr)
			why = append(why, res.Conflicts[p])
		}
		sort.Strings(why)
		l.cfg.Log.Info("change set conflicts with the workspace", "change_set", req.ID, "entries", len(why))
		return res, corral.Errorf(corral.ECONFLICT, "nothing was applied: the workspace changed since the run saw it (%s)", strings.Join(why, "; "))
	}
	if err != nil {
		l.cfg.Log.Warn("change set not applied", "change_set", req.ID, "err", err)
		return corral.ApplyResult{}, err
	}
	return corral.ApplyResult{Commit: l.commitLocked(req.AgentID, req.Commit, paths)}, nil
}

// DiscardStage removes a staged tree, mounted or not.
func (l *Local) DiscardStage(ctx context.Context, id string) error {
	if err := sanitize.ID("stage", id); err != nil {
		return err
	}
	l.forget(id)
	return workspace.RemoveStage(l.stageDir(id))
}

// DropAgent removes everything this node holds of a deleted agent. Its
// staged trees are found by the workspace each was staged from, so trees
// no change set names any more (a crash's) go too; each is unmounted
// before anything under it is removed, and the workspace, the lower layer
// of their overlays, goes only once they all have.
func (l *Local) DropAgent(ctx context.Context, agentID string) error {
	if err := sanitize.ID("agent", agentID); err != nil {
		return err
	}
	defer l.writers.Lock(agentID)()
	ws := l.workspaceDir(agentID)
	ents, err := os.ReadDir(l.stagesDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return corral.Internal("drop agent", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := l.stageDir(e.Name())
		if ours, err := workspace.StagedFrom(dir, ws); err != nil || !ours {
			errs = append(errs, err)
			continue
		}
		l.forget(e.Name())
		errs = append(errs, workspace.RemoveStage(dir))
	}
	if err := errors.Join(errs...); err != nil {
		return corral.Internal("drop agent", err)
	}
	for _, d := range []string{ws, l.journalDir(agentID), filepath.Join(l.clonesDir(), agentID)} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return corral.Internal("drop agent", err)
	}
	return nil
}

// Recover finishes or rolls back every apply a crash interrupted. The
// process that holds the node calls it at start-up, before anything else
// touches a workspace: it is no part of corral.Trees.
func (l *Local) Recover(ctx context.Context) error {
	ents, err := os.ReadDir(l.journalsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return corral.Internal("recover", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := workspace.Recover(l.workspaceDir(e.Name()), l.journalDir(e.Name()), nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return corral.Internal("recover", err)
	}
	return nil
}
