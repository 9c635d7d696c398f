package service

import (
	"context"
	"slices"
	"sort"
	"time"

	"corral"
	"corral/internal/access"
	"corral/internal/sanitize"
)

// ChangeStore is what the change-set use cases need from storage.
type ChangeStore interface {
	corral.ChangeStore
	Agent(ctx context.Context, id, userID string) (corral.Agent, error)
	// AgentsFor lists the agents a user can reach, with the user's level.
	AgentsFor(ctx context.Context, userID string) ([]corral.Agent, error)
	// WaitingChangeSets lists the pending change sets of the agents
	// named, newest first.
	WaitingChangeSets(ctx context.Context, agentIDs []string) ([]corral.WaitingChangeSet, error)
}

// Decisions are the change sets' review: list them, approve or reject
// their entries, expire what nobody decided in time. The trees are the
// node's (corral.Trees): Decisions decides who may do what and keeps the
// records; an approved entry is applied transactionally by the node, and
// with a repository committed.
type Decisions struct {
	store ChangeStore
	trees corral.Trees
	repos *Repositories
	cfg   Config
}

// NewDecisions returns the review use cases; repos commits what is
// applied to an agent with a repository.
func NewDecisions(store ChangeStore, trees corral.Trees, repos *Repositories, cfg Config) *Decisions {
	cfg.defaults()
	return &Decisions{store: store, trees: trees, repos: repos, cfg: cfg}
}

// apply applies the entries of cs at idx, all or nothing; the caller
// holds the agent's lock (Repositories.lock). Entries whose file changed in the
// workspace since the run saw it become conflicted, and nothing is applied
// (ECONFLICT naming them). A failure rolls back and leaves the entries
// pending. With a repository, what was applied is one commit.
func (c *Decisions) apply(ctx context.Context, cs *corral.ChangeSet, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	req := corral.ApplyRequest{AgentID: cs.AgentID, StageID: cs.ID, ID: cs.ID, Entries: make([]corral.ChangeEntry, len(idx))}
	for k, i := range idx {
		req.Entries[k] = cs.Entries[i]
	}
	commit, repo := c.repos.changeSetCommit(ctx, cs, req.Entries) // with a repository
	req.Commit = commit
	res, err := c.trees.Apply(ctx, req)
	if len(res.Conflicts) > 0 {
		for _, i := range idx {
			if _, ok := res.Conflicts[cs.Entries[i].Path]; ok {
				cs.Entries[i].State = corral.EntryConflicted
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	for _, i := range idx {
		cs.Entries[i].State = corral.EntryApplied
	}
	c.repos.recordCommit(ctx, repo, res.Commit)
	return nil
}

// load reads a change set and checks the actor's access to its agent,
// fresh. A change set of an agent the actor cannot see does not exist.
func (c *Decisions) load(ctx context.Context, actor corral.User, id string, action access.Action) (corral.ChangeSet, corral.Agent, error) {
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
func (c *Decisions) List(ctx context.Context, actor corral.User, agentID string) ([]corral.ChangeSet, error) {
	a, err := c.store.Agent(ctx, agentID, actor.ID)
	if err != nil {
		return nil, err
	}
	if err := access.Check(a.Access, access.ViewChanges).Err("agent", access.ViewChanges); err != nil {
		return nil, err
	}
	return c.store.ChangeSets(ctx, agentID)
}

// Waiting is the actor's inbox: every pending change set, newest first,
// of the agents on which the actor may decide change sets. Which agents
// those are is the access policy's answer for each agent the actor can
// reach, so a viewer's inbox is empty however much waits.
func (c *Decisions) Waiting(ctx context.Context, actor corral.User) ([]corral.WaitingChangeSet, error) {
	agents, err := c.store.AgentsFor(ctx, actor.ID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, a := range agents {
		if a.PendingChanges > 0 && access.Check(a.Access, access.DecideChanges) == access.Allow {
			ids = append(ids, a.ID)
		}
	}
	return c.store.WaitingChangeSets(ctx, ids)
}

// Get returns a change set with each text entry's diff, as made when the
// run ended: it stays readable after the set is decided.
func (c *Decisions) Get(ctx context.Context, actor corral.User, id string) (corral.ChangeSet, error) {
	cs, _, err := c.load(ctx, actor, id, access.ViewChanges)
	if err != nil {
		return cs, err
	}
	// A set made before diffs were kept has none stored: while it waits,
	// its staged tree is still there to make them from.
	if cs.Status == corral.ChangePending && !slices.ContainsFunc(cs.Entries, func(e corral.ChangeEntry) bool { return e.Diff != "" }) {
		if entries, err := c.trees.Diffs(ctx, cs.AgentID, cs.ID, cs.Entries); err == nil {
			cs.Entries = entries
		}
	}
	return cs, nil
}

// Approve applies the pending entries named by paths (nil: every pending
// entry that is not protected), all or nothing among them; the others stay
// pending. Entries whose file changed in the workspace since the run saw it
// become conflicted and nothing is applied: ECONFLICT, saying which.
func (c *Decisions) Approve(ctx context.Context, actor corral.User, id string, paths []string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, true, paths)
}

// Reject rejects the pending entries named by paths (nil: every pending
// entry); the others stay pending.
func (c *Decisions) Reject(ctx context.Context, actor corral.User, id string, paths []string) (corral.ChangeSet, error) {
	return c.decide(ctx, actor, id, false, paths)
}

func (c *Decisions) decide(ctx context.Context, actor corral.User, id string, approve bool, paths []string) (corral.ChangeSet, error) {
	cs, _, err := c.load(ctx, actor, id, access.DecideChanges)
	if err != nil {
		return corral.ChangeSet{}, err
	}
	// Decisions on one agent's change sets, like every write of its
	// workspace, happen one at a time, each from a fresh read.
	defer c.repos.lock(cs.AgentID)()
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
		decideErr = c.apply(ctx, &decided, idx)
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
		return e.State == corral.EntryPending && (!approve || e.Class != corral.ClassProtected)
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
func (c *Decisions) closeStage(cs corral.ChangeSet) {
	if err := c.trees.DiscardStage(context.Background(), cs.ID); err != nil {
		c.cfg.Log.Warn("removing a staged tree", "change_set", cs.ID, "err", err)
	}
}

func (c *Decisions) expire(ctx context.Context, cs corral.ChangeSet) {
	expired := cs.Expired()
	if err := c.store.UpdateChangeSet(ctx, expired, corral.ChangePending); err == nil {
		c.closeStage(expired)
	}
}

// ExpireDue marks every pending change set past its time expired and
// removes its staged tree. An expired change set is never applied.
func (c *Decisions) ExpireDue(ctx context.Context) (int, error) {
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
