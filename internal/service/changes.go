package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"corral"
	"corral/internal/access"
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
}

// Changes turns runs into change sets and decides them.
type Changes struct {
	store ChangeStore
	ws    WorkspaceConfig
	cfg   Config
	// writers serialises everything that writes one agent's persistent
	// workspace (applies and uploads): an apply's journal assumes nobody
	// else changes the tree under it.
	writers keyLock
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
func (c *Changes) Begin(ctx context.Context, agent corral.Agent, id string) (*workspace.Stage, error) {
	dir, err := c.Workspace(agent.ID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.ws.DataDir, "stages"), 0o711); err != nil {
		return nil, corral.Internal("stage", err)
	}
	opt := c.stageOptions()
	opt.Secrets = append(append([]string(nil), opt.Secrets...), agent.Policy.Secrets...)
	return workspace.NewStage(dir, c.stageDir(id), opt)
}

// Reopen opens the staged tree id of an agent left by an earlier process
// or by a paused run. ENOTFOUND when there is none.
func (c *Changes) Reopen(ctx context.Context, agentID, id string) (*workspace.Stage, error) {
	return workspace.OpenStage(c.workspaceDir(agentID), c.stageDir(id), c.stageOptions())
}

// Discard removes a staged tree that will not become a change set.
func (c *Changes) Discard(id string) error { return workspace.RemoveStage(c.stageDir(id)) }

// Finish records what a staged run changed, as Corral measures it, as the
// change set id. When auto is true and the agent's policy is auto, ordinary
// entries are applied at once; otherwise (review policy, or a run that did
// not complete) every entry waits for a person. Protected entries are
// always denied. It returns a change set with an empty ID when the run
// changed nothing. The stage is closed unless the change set waits.
func (c *Changes) Finish(ctx context.Context, agent corral.Agent, runID, id string, st *workspace.Stage, auto bool) (corral.ChangeSet, error) {
	m, err := st.Manifest()
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
		StageDir: c.stageDir(id), CreatedAt: now, ExpiresAt: now.Add(c.ws.ChangeTTL),
	}
	for _, e := range m {
		ce := corral.ChangeEntry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: uint32(e.Mode), OldMode: uint32(e.OldMode), Class: e.Class, Flags: e.Flags, State: corral.EntryPending,
		}
		if ce.Class == workspace.ClassProtected {
			ce.State = corral.EntryDenied
		}
		cs.Entries = append(cs.Entries, ce)
	}
	if mode == corral.ChangesAuto {
		c.applyEntries(&cs, func(e corral.ChangeEntry) bool { return e.Class == workspace.ClassOrdinary }, st)
	}
	cs.Status = settle(cs)
	if err := c.store.CreateChangeSet(ctx, cs); err != nil {
		st.Close()
		return corral.ChangeSet{}, err
	}
	if cs.Status != corral.ChangePending {
		st.Close()
	}
	return cs, nil
}

// settle derives a change set's status from its entries, unless a failure
// already decided it.
func settle(cs corral.ChangeSet) string {
	if cs.Status == corral.ChangeConflicted || cs.Status == corral.ChangeFailed {
		return cs.Status
	}
	applied, pending := false, false
	for _, e := range cs.Entries {
		switch e.State {
		case corral.EntryPending:
			pending = true
		case corral.EntryApplied:
			applied = true
		}
	}
	switch {
	case pending:
		return corral.ChangePending
	case applied:
		return corral.ChangeApplied
	default:
		return corral.ChangeDenied
	}
}

// applyEntries applies the pending entries that pick selects, all or
// nothing. A conflict or a failure drops every pending entry and marks the
// change set conflicted or failed.
func (c *Changes) applyEntries(cs *corral.ChangeSet, pick func(corral.ChangeEntry) bool, st *workspace.Stage) error {
	var entries []workspace.Entry
	var idx []int
	for i, e := range cs.Entries {
		if e.State != corral.EntryPending || e.Class == workspace.ClassProtected || !pick(e) {
			continue
		}
		entries = append(entries, workspace.Entry{
			Path: e.Path, Op: e.Op, OldSHA256: e.OldSHA256, NewSHA256: e.NewSHA256, Size: e.Size,
			Mode: fs.FileMode(e.Mode), OldMode: fs.FileMode(e.OldMode), Flags: e.Flags, Class: e.Class,
		})
		idx = append(idx, i)
	}
	if len(entries) == 0 {
		return nil
	}
	unlock := c.writers.lock(cs.AgentID)
	err := workspace.Apply(c.workspaceDir(cs.AgentID), c.journalDir(cs.AgentID), cs.ID, entries, st.Source(), nil)
	unlock()
	if err != nil {
		cs.Status = corral.ChangeFailed
		if corral.ErrorCode(err) == corral.ECONFLICT {
			cs.Status = corral.ChangeConflicted
		}
		c.cfg.Log.Warn("change set not applied", "change_set", cs.ID, "status", cs.Status, "err", err)
		for i := range cs.Entries {
			if cs.Entries[i].State == corral.EntryPending {
				cs.Entries[i].State = corral.EntryDropped
			}
		}
		return err
	}
	for _, i := range idx {
		cs.Entries[i].State = corral.EntryApplied
	}
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

// List returns an agent's change sets, newest first.
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

// maxDiff bounds the files Get renders as a diff.
const maxDiff = 1 << 20

// Get returns a change set and a unified diff for each text entry whose
// content is still at hand (by path).
func (c *Changes) Get(ctx context.Context, actor corral.User, id string) (corral.ChangeSet, map[string]string, error) {
	cs, _, err := c.load(ctx, actor, id, access.ViewChanges)
	if err != nil {
		return corral.ChangeSet{}, nil, err
	}
	diffs := map[string]string{}
	if cs.Status != corral.ChangePending {
		return cs, diffs, nil // the staged tree is gone; the hashes remain
	}
	st, err := workspace.OpenStage(c.workspaceDir(cs.AgentID), cs.StageDir, c.stageOptions())
	if err != nil {
		return cs, diffs, nil
	}
	src := st.Source()
	old := workspace.DirSource(c.workspaceDir(cs.AgentID))
	for _, e := range cs.Entries {
		if e.Class == workspace.ClassProtected || e.Size > maxDiff {
			continue
		}
		a, okA := readText(old, e.Path, e.Op != workspace.OpCreate)
		b, okB := readText(src, e.Path, e.Op != workspace.OpDelete)
		if !okA || !okB {
			continue
		}
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: splitLines(a), B: splitLines(b),
			FromFile: "a/" + e.Path, ToFile: "b/" + e.Path, Context: 3,
		})
		if err == nil {
			diffs[e.Path] = d
		}
	}
	return cs, diffs, nil
}

// splitLines cuts text into lines that keep their "\n". Unlike
// difflib.SplitLines it adds no empty line after a final newline; a last
// line without one gets one, so the diff stays line-based.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// readText reads a small text file from src; want false means the file is
// not expected to exist and reads as empty.
func readText(src workspace.Source, path string, want bool) (string, bool) {
	if !want {
		return "", true
	}
	r, err := src.Open(path)
	if err != nil {
		return "", false
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxDiff+1))
	if err != nil || len(b) > maxDiff || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// Approve applies every pending entry that is not protected, all or
// nothing. A workspace that changed since the run answers conflict and
// nothing is applied.
func (c *Changes) Approve(ctx context.Context, actor corral.User, id string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, true)
}

// Reject drops every pending entry.
func (c *Changes) Reject(ctx context.Context, actor corral.User, id string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, false)
}

func (c *Changes) decide(ctx context.Context, actor corral.User, id string, approve bool) (corral.ChangeSet, error) {
	cs, _, err := c.load(ctx, actor, id, access.DecideChanges)
	if err != nil {
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
	decided := cs
	decided.DecidedBy, decided.DecidedAt = &corral.UserRef{ID: actor.ID, Name: actor.Name}, now
	var applyErr error
	if approve {
		st, err := workspace.OpenStage(c.workspaceDir(cs.AgentID), cs.StageDir, c.stageOptions())
		if err != nil {
			return cs, err
		}
		applyErr = c.applyEntries(&decided, func(corral.ChangeEntry) bool { return true }, st)
		decided.Status = settle(decided)
	} else {
		drop(&decided)
		decided.Status = corral.ChangeRejected
	}
	if err := c.store.UpdateChangeSet(ctx, decided, corral.ChangePending); err != nil {
		return cs, err
	}
	c.closeStage(decided)
	c.cfg.Log.Info("change set decided", "change_set", id, "status", decided.Status, "by", actor.ID)
	if corral.ErrorCode(applyErr) == corral.ECONFLICT {
		return decided, corral.Errorf(corral.ECONFLICT, "the workspace changed since the run: %s; nothing was applied", corral.ErrorMessage(applyErr))
	}
	if applyErr != nil {
		return decided, applyErr
	}
	return decided, nil
}

func drop(cs *corral.ChangeSet) {
	for i := range cs.Entries {
		if cs.Entries[i].State == corral.EntryPending {
			cs.Entries[i].State = corral.EntryDropped
		}
	}
}

// closeStage removes a decided change set's staged tree, mounted or not.
func (c *Changes) closeStage(cs corral.ChangeSet) {
	if err := workspace.RemoveStage(cs.StageDir); err != nil {
		c.cfg.Log.Warn("removing a staged tree", "change_set", cs.ID, "err", err)
	}
}

func (c *Changes) expire(ctx context.Context, cs corral.ChangeSet) {
	expired := cs
	drop(&expired)
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
