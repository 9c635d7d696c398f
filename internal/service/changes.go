package service

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/archive"
	"corral/internal/sanitize"
	"corral/internal/workspace"
)

// ChangeStore is what the change-set use cases need from storage.
type ChangeStore interface {
	corral.ChangeStore
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
}

// WorkspaceConfig says where workspaces live and who owns them.
type WorkspaceConfig struct {
	DataDir string // workspaces/, stages/ and journals/ live under it
	// UID and GID own persistent workspaces and the writable parts of
	// staged trees: the sandbox's host user.
	UID, GID  int
	ChangeTTL time.Duration // how long a proposal waits for a decision; default 7 days
	NoOverlay bool          // stage by copying even where overlayfs works
	Secrets   []string      // extra globs left out of staged trees

	// Imports bounds a workspace import; zero fields take archive's defaults.
	Imports archive.Limits
}

// Changes turns runs into change sets and decides them.
type Changes struct {
	store ChangeStore
	ws    WorkspaceConfig
	cfg   Config
	// writers serialises everything that writes one agent's persistent
	// workspace (applies, uploads) or fixes a stage's view of it (staging,
	// manifests): an apply's journal assumes nobody else changes the tree
	// under it, and an open stage must hear of every change (KeepBases).
	writers keyLock

	// open are the stages whose manifest is not taken yet, by agent and
	// stage id: the runs working on a workspace now. Guarded by mu; only
	// changed while the agent's writers lock is held.
	mu   sync.Mutex
	open map[string]map[string]*workspace.Stage

	repos *repositories // nil until UseRepositories (repository.go)
}

// NewChanges returns the change-set use cases.
func NewChanges(store ChangeStore, ws WorkspaceConfig, cfg Config) *Changes {
	cfg.defaults()
	if ws.ChangeTTL == 0 {
		ws.ChangeTTL = 7 * 24 * time.Hour
	}
	return &Changes{store: store, ws: ws, cfg: cfg}
}

func (c *Changes) workspaceDir(agentID string) string {
	return filepath.Join(c.ws.DataDir, "workspaces", agentID)
}
func (c *Changes) stageDir(id string) string { return filepath.Join(c.ws.DataDir, "stages", id) }
func (c *Changes) journalDir(agentID string) string {
	return filepath.Join(c.ws.DataDir, "journals", agentID)
}

func (c *Changes) stageOptions() workspace.StageOptions {
	return workspace.StageOptions{Secrets: c.ws.Secrets, UID: c.ws.UID, GID: c.ws.GID, NoOverlay: c.ws.NoOverlay}
}

// Workspace returns the agent's persistent workspace, creating it (owned by
// the sandbox's user) on first use.
func (c *Changes) Workspace(agentID string) (string, error) {
	dir := c.workspaceDir(agentID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", corral.Internal("workspace", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", corral.Internal("workspace", err)
	}
	if c.ws.UID != 0 {
		if err := os.Lchown(dir, c.ws.UID, c.ws.GID); err != nil {
			return "", corral.Internal("workspace", err)
		}
	}
	return dir, nil
}

// Begin stages the agent's workspace for a run under id, which the change
// set made from it will carry. The caller (the runner) has already decided
// the run may happen.
func (c *Changes) Begin(ctx context.Context, agent corral.Agent, id string) error {
	dir, err := c.Workspace(agent.ID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.ws.DataDir, "stages"), 0o711); err != nil {
		return corral.Internal("stage", err)
	}
	opt := c.stageOptions()
	opt.Secrets = append(append([]string(nil), opt.Secrets...), agent.Policy.Secrets...)
	opt.DiskBytes, opt.DiskInodes = agent.Limits.DiskBytes, agent.Limits.DiskInodes
	// Under the writers lock: from the moment the tree is staged, every
	// change to the workspace is told to it.
	defer c.writers.lock(agent.ID)()
	st, err := workspace.NewStage(dir, c.stageDir(id), opt)
	if err != nil {
		return err
	}
	c.track(agent.ID, id, st)
	return nil
}

// Reopen opens the staged tree id of an agent left by an earlier process
// or by a paused run. ENOTFOUND when there is none.
func (c *Changes) Reopen(ctx context.Context, agentID, id string) error {
	defer c.writers.lock(agentID)()
	if c.stage(id) != nil {
		return nil // open already
	}
	st, err := workspace.OpenStage(c.workspaceDir(agentID), c.stageDir(id), c.stageOptions())
	if err != nil {
		return err
	}
	c.track(agentID, id, st)
	return nil
}

// stage is the open stage id, nil if it is not open.
func (c *Changes) stage(id string) *workspace.Stage {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, stages := range c.open {
		if st := stages[id]; st != nil {
			return st
		}
	}
	return nil
}

// Tree is the host directory of the open stage id, for the machine that
// runs its sandbox.
func (c *Changes) Tree(id string) (string, error) {
	st := c.stage(id)
	if st == nil {
		return "", corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	return st.Tree(), nil
}

// DiskFull reports whether the open stage id has used up its own disk.
func (c *Changes) DiskFull(id string) (bool, error) {
	st := c.stage(id)
	if st == nil {
		return false, corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	return st.DiskFull()
}

// Discard removes a staged tree that will not become a change set.
func (c *Changes) Discard(id string) error {
	c.mu.Lock()
	for _, stages := range c.open {
		delete(stages, id)
	}
	c.mu.Unlock()
	return workspace.RemoveStage(c.stageDir(id))
}

func (c *Changes) track(agentID, id string, st *workspace.Stage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]map[string]*workspace.Stage{}
	}
	if c.open[agentID] == nil {
		c.open[agentID] = map[string]*workspace.Stage{}
	}
	c.open[agentID][id] = st
}

func (c *Changes) forget(agentID, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open[agentID], id)
	if len(c.open[agentID]) == 0 {
		delete(c.open, agentID)
	}
}

// keepBases tells every open stage of the agent what paths hold before the
// caller changes them (see workspace.Stage.KeepBases), so that approving a
// run's change set can never overwrite an edit made while it worked. The
// caller holds the agent's writers lock. A stage that cannot record it
// makes the write fail: the change would otherwise go undetected.
func (c *Changes) keepBases(agentID string, paths []string) error {
	c.mu.Lock()
	stages := make([]*workspace.Stage, 0, len(c.open[agentID]))
	for _, st := range c.open[agentID] {
		stages = append(stages, st)
	}
	c.mu.Unlock()
	for _, st := range stages {
		if err := st.KeepBases(paths); err != nil {
			return corral.Internal("keep bases", err)
		}
	}
	return nil
}

// Finish records what a staged run changed, as Corral measures it, as the
// change set id. When auto is true and the agent's policy is auto, ordinary
// entries are applied at once; otherwise (review policy, or a run that did
// not complete) every entry waits for a person. Protected entries are
// always denied. Each text entry's diff is made now and kept with the
// change set, so it stays readable after the decision. It returns a change
// set with an empty ID when the run changed nothing. The stage is closed
// unless the change set waits.
func (c *Changes) Finish(ctx context.Context, agent corral.Agent, runID, id string, auto bool) (corral.ChangeSet, error) {
	unlock := c.writers.lock(agent.ID)
	defer unlock()
	st := c.stage(id)
	if st == nil {
		return corral.ChangeSet{}, corral.Errorf(corral.ENOTFOUND, "no open stage %s", id)
	}
	m, err := st.Manifest()
	c.forget(agent.ID, id)
	if err != nil {
		st.Close()
		return corral.ChangeSet{}, err
	}
	m = workspace.ClassifyAll(m, workspace.ClassPolicy{Protected: agent.Policy.Protected, Risky: agent.Policy.Risky})
	if len(m) == 0 {
		return corral.ChangeSet{}, st.Close()
	}
	mode := agent.Policy.Changes
	if !auto {
		mode = corral.ChangesReview
	}
	now := c.cfg.Now().UTC()
	cs := corral.ChangeSet{
		ID: id, AgentID: agent.ID, RunID: runID, Mode: mode,
		CreatedAt: now, ExpiresAt: now.Add(c.ws.ChangeTTL),
	}
	for _, e := range m {
		ce := corral.ChangeEntry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: uint32(e.Mode), OldMode: uint32(e.OldMode), Class: e.Class, Flags: e.Flags, Note: e.Note,
			State: corral.EntryPending,
		}
		if ce.Class == workspace.ClassProtected {
			ce.State = corral.EntryDenied
		}
		cs.Entries = append(cs.Entries, ce)
	}
	addDiffs(cs.Entries, workspace.DirSource(c.workspaceDir(agent.ID)), st.Source())
	if mode == corral.ChangesAuto {
		var picked []int
		for i, e := range cs.Entries {
			if e.State == corral.EntryPending && e.Class == workspace.ClassOrdinary {
				picked = append(picked, i)
			}
		}
		// What could not be applied (a conflict, a failure) waits for a
		// person: nothing is lost and nothing is applied half.
		if err := c.applyLocked(&cs, picked, st); err != nil && corral.ErrorCode(err) != corral.ECONFLICT {
			c.cfg.Log.Warn("auto-apply failed; the change set waits for review", "change_set", cs.ID, "err", err)
		}
	}
	cs.Status = settle(cs)
	cs.DiskBytes, _ = st.DiskUsage()
	if err := c.store.CreateChangeSet(ctx, cs); err != nil {
		st.Close()
		return corral.ChangeSet{}, err
	}
	if cs.Status != corral.ChangePending {
		st.Close()
	}
	return cs, nil
}

// settle derives a decided change set's status from its entries: pending
// while any entry is; then applied if anything was; conflicted, rejected
// or denied (only protected entries) if nothing was.
func settle(cs corral.ChangeSet) string {
	seen := map[string]bool{}
	for _, e := range cs.Entries {
		seen[e.State] = true
	}
	switch {
	case seen[corral.EntryPending]:
		return corral.ChangePending
	case seen[corral.EntryApplied]:
		return corral.ChangeApplied
	case seen[corral.EntryConflicted]:
		return corral.ChangeConflicted
	case seen[corral.EntryRejected]:
		return corral.ChangeRejected
	default:
		return corral.ChangeDenied
	}
}

// applyLocked applies the entries of cs at idx, all or nothing; the caller
// holds the agent's writers lock. First every base is checked: entries whose
// file changed in the workspace since the run saw it become conflicted, and
// then nothing is applied (ECONFLICT naming them). A failure rolls back and
// leaves the entries pending. The other open stages of the agent hear of
// the change before it is made.
func (c *Changes) applyLocked(cs *corral.ChangeSet, idx []int, st *workspace.Stage) error {
	if len(idx) == 0 {
		return nil
	}
	entries := make([]workspace.Entry, len(idx))
	paths := make([]string, len(idx))
	for k, i := range idx {
		e := cs.Entries[i]
		entries[k] = workspace.Entry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: fs.FileMode(e.Mode), OldMode: fs.FileMode(e.OldMode), Flags: e.Flags, Class: e.Class,
		}
		paths[k] = e.Path
	}
	dir := c.workspaceDir(cs.AgentID)
	conflicts, err := workspace.Conflicts(dir, entries)
	if err != nil {
		return err
	}
	if len(conflicts) == 0 {
		if err = c.keepBases(cs.AgentID, paths); err != nil {
			return err
		}
		err = workspace.Apply(dir, c.journalDir(cs.AgentID), cs.ID, entries, st.Source(), nil)
		if corral.ErrorCode(err) == corral.ECONFLICT {
			for _, p := range paths {
				conflicts[p] = err
			}
		}
	}
	if len(conflicts) > 0 {
		var why []string
		for _, i := range idx {
			if cerr, ok := conflicts[cs.Entries[i].Path]; ok {
				cs.Entries[i].State = corral.EntryConflicted
				why = append(why, corral.ErrorMessage(cerr))
			}
		}
		sort.Strings(why)
		c.cfg.Log.Info("change set conflicts with the workspace", "change_set", cs.ID, "entries", len(why))
		return corral.Errorf(corral.ECONFLICT, "nothing was applied: the workspace changed since the run saw it (%s)", strings.Join(why, "; "))
	}
	if err != nil {
		c.cfg.Log.Warn("change set not applied", "change_set", cs.ID, "err", err)
		return err
	}
	for _, i := range idx {
		cs.Entries[i].State = corral.EntryApplied
	}
	c.commitChangeSet(cs, paths) // with a repository: one commit (repository.go)
	return nil
}

// load reads a change set and checks the actor's access to its agent,
// fresh. A change set of an agent the actor cannot see does not exist.
func (c *Changes) load(ctx context.Context, actor corral.User, id string, action access.Action) (corral.ChangeSet, corral.Agent, error) {
	cs, err := c.store.ChangeSet(ctx, id)
	if err != nil {
		return corral.ChangeSet{}, corral.Agent{}, err
	}
	a, err := c.store.Agent(ctx, cs.AgentID, actor.ID)
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.ChangeSet{}, corral.Agent{}, corral.NotFound("change set")
	}
	if err != nil {
		return corral.ChangeSet{}, corral.Agent{}, err
	}
	if err := access.Check(a.Access, action).Err("change set", action); err != nil {
		return corral.ChangeSet{}, corral.Agent{}, err
	}
	return cs, a, nil
}

// List returns an agent's change sets, newest first, without diffs.
func (c *Changes) List(ctx context.Context, actor corral.User, agentID string) ([]corral.ChangeSet, error) {
	a, err := c.store.Agent(ctx, agentID, actor.ID)
	if err != nil {
		return nil, err
	}
	if err := access.Check(a.Access, access.ViewChanges).Err("agent", access.ViewChanges); err != nil {
		return nil, err
	}
	return c.store.ChangeSets(ctx, agentID)
}

// Get returns a change set with each text entry's diff, as made when the
// run ended: it stays readable after the set is decided.
func (c *Changes) Get(ctx context.Context, actor corral.User, id string) (corral.ChangeSet, error) {
	cs, _, err := c.load(ctx, actor, id, access.ViewChanges)
	if err != nil {
		return cs, err
	}
	// A set made before diffs were kept has none stored: while it waits,
	// its staged tree is still there to make them from.
	if cs.Status == corral.ChangePending && !slices.ContainsFunc(cs.Entries, func(e corral.ChangeEntry) bool { return e.Diff != "" }) {
		if st, err := workspace.OpenStage(c.workspaceDir(cs.AgentID), c.stageDir(cs.ID), c.stageOptions()); err == nil {
			addDiffs(cs.Entries, workspace.DirSource(c.workspaceDir(cs.AgentID)), st.Source())
		}
	}
	return cs, nil
}

// Approve applies the pending entries named by paths (nil: every pending
// entry that is not protected), all or nothing among them; the others stay
// pending. Entries whose file changed in the workspace since the run saw it
// become conflicted and nothing is applied: ECONFLICT, saying which.
func (c *Changes) Approve(ctx context.Context, actor corral.User, id string, paths []string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, true, paths)
}

// Reject rejects the pending entries named by paths (nil: every pending
// entry); the others stay pending.
func (c *Changes) Reject(ctx context.Context, actor corral.User, id string, paths []string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, false, paths)
}

func (c *Changes) decide(ctx context.Context, actor corral.User, id string, approve bool, paths []string) (corral.ChangeSet, error) {
	cs, _, err := c.load(ctx, actor, id, access.DecideChanges)
	if err != nil {
		return corral.ChangeSet{}, err
	}
	// Decisions on one agent's change sets, like every write of its
	// workspace, happen one at a time, each from a fresh read.
	defer c.writers.lock(cs.AgentID)()
	if cs, err = c.store.ChangeSet(ctx, id); err != nil {
		return corral.ChangeSet{}, err
	}
	if cs.Status != corral.ChangePending {
		return cs, corral.Errorf(corral.ECONFLICT, "the change set is %s, not pending", cs.Status)
	}
	now := c.cfg.Now().UTC()
	if !now.Before(cs.ExpiresAt) {
		c.expire(ctx, cs)
		return cs, corral.Errorf(corral.ECONFLICT, "the change set expired at %s and will never be applied", cs.ExpiresAt.Format(time.RFC3339))
	}
	idx, err := chosen(cs, paths, approve)
	if err != nil {
		return cs, err
	}
	decided := cs
	decided.Entries = slices.Clone(cs.Entries)
	decided.DecidedBy, decided.DecidedAt = &corral.UserRef{ID: actor.ID, Name: actor.Name}, now
	var decideErr error
	if approve {
		st, err := workspace.OpenStage(c.workspaceDir(cs.AgentID), c.stageDir(cs.ID), c.stageOptions())
		if err != nil {
			return cs, err
		}
		decideErr = c.applyLocked(&decided, idx, st)
		if decideErr != nil && corral.ErrorCode(decideErr) != corral.ECONFLICT {
			return cs, decideErr // rolled back: every entry is as it was
		}
	} else {
		for _, i := range idx {
			decided.Entries[i].State = corral.EntryRejected
		}
	}
	decided.Status = settle(decided)
	if err := c.store.UpdateChangeSet(ctx, decided, corral.ChangePending); err != nil {
		return cs, err
	}
	if decided.Status != corral.ChangePending {
		c.closeStage(decided)
	}
	c.cfg.Log.Info("change set decided", "change_set", id, "status", decided.Status, "entries", len(idx), "by", actor.ID)
	return decided, decideErr
}

// chosen returns the indexes of the entries a decision is about: those
// named by paths, each of which must be a pending entry (and, to approve,
// not protected), or with paths nil every pending entry that may be.
func chosen(cs corral.ChangeSet, paths []string, approve bool) ([]int, error) {
	decidable := func(e corral.ChangeEntry) bool {
		return e.State == corral.EntryPending && (!approve || e.Class != workspace.ClassProtected)
	}
	var idx []int
	if paths == nil {
		for i, e := range cs.Entries {
			if decidable(e) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return nil, corral.Errorf(corral.ECONFLICT, "no entry of the change set can be decided")
		}
		return idx, nil
	}
	if len(paths) == 0 {
		return nil, corral.Errorf(corral.EINVALID, "paths is empty: name the entries to decide, or leave it out to decide them all")
	}
	byPath := make(map[string]int, len(cs.Entries))
	for i, e := range cs.Entries {
		byPath[e.Path] = i
	}
	seen := map[int]bool{}
	for _, p := range paths {
		i, ok := byPath[p]
		switch {
		case !ok:
			return nil, corral.Errorf(corral.EINVALID, "the change set has no entry %q", sanitize.Escape(p))
		case cs.Entries[i].State != corral.EntryPending:
			return nil, corral.Errorf(corral.EINVALID, "entry %q is %s, not pending", sanitize.Escape(p), cs.Entries[i].State)
		case !decidable(cs.Entries[i]):
			return nil, corral.Errorf(corral.EINVALID, "entry %q is protected and is never applied", sanitize.Escape(p))
		}
		if !seen[i] {
			seen[i] = true
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	return idx, nil
}

// closeStage removes a decided change set's staged tree, mounted or not.
func (c *Changes) closeStage(cs corral.ChangeSet) {
	if err := workspace.RemoveStage(c.stageDir(cs.ID)); err != nil {
		c.cfg.Log.Warn("removing a staged tree", "change_set", cs.ID, "err", err)
	}
}

func (c *Changes) expire(ctx context.Context, cs corral.ChangeSet) {
	expired := cs
	expired.Entries = slices.Clone(cs.Entries)
	for i := range expired.Entries {
		if expired.Entries[i].State == corral.EntryPending {
			expired.Entries[i].State = corral.EntryDropped
		}
	}
	expired.Status = corral.ChangeExpired
	if err := c.store.UpdateChangeSet(ctx, expired, corral.ChangePending); err == nil {
		c.closeStage(expired)
	}
}

// ExpireDue marks every pending change set past its time expired and
// removes its staged tree. An expired change set is never applied.
func (c *Changes) ExpireDue(ctx context.Context) (int, error) {
	pending, err := c.store.PendingChangeSets(ctx)
	if err != nil {
		return 0, err
	}
	n, now := 0, c.cfg.Now()
	for _, cs := range pending {
		if !now.Before(cs.ExpiresAt) {
			c.expire(ctx, cs)
			n++
		}
	}
	return n, nil
}

// Recover finishes or rolls back every apply a crash interrupted. It runs
// at start-up, before anything else touches a workspace.
func (c *Changes) Recover(ctx context.Context) error {
	root := filepath.Join(c.ws.DataDir, "journals")
	ents, err := os.ReadDir(root)
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
		if err := workspace.Recover(c.workspaceDir(e.Name()), c.journalDir(e.Name()), nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return corral.Internal("recover", err)
	}
	return nil
}
