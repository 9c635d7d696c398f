package service

import (
	"context"

	"corral"
	"corral/internal/access"
	"corral/internal/trace"
)

// Sync brings the agent's workspace to its tracked branch on the remote,
// fetched with the credential the repository was set with: a
// fast-forward when the workspace holds no commit of its own, otherwise
// a rebase of Corral's commits onto the remote's. Only while no run of
// the agent is active: ECONFLICT naming it. A change set that waits for
// review stays pending (the answer names it): its entries are checked
// against the new base when it is decided, as every apply checks them, and
// an entry whose file the sync changed becomes conflicted, named, and is
// not applied. A rebase that does not apply cleanly changes nothing:
// ECONFLICT, reason sync_conflict, naming the paths in conflict.
func (c *Repositories) Sync(ctx context.Context, actor corral.User, agentID string) (corral.SyncResult, error) {
	a, err := loadAgent(ctx, c.store, actor, agentID, access.WriteFiles)
	if err != nil {
		return corral.SyncResult{}, err
	}
	repos, err := c.reposOn()
	if err != nil {
		return corral.SyncResult{}, err
	}
	r, err := repos.cfg.Store.Repository(ctx, a.ID)
	if err != nil {
		return corral.SyncResult{}, err
	}
	if r.Status != corral.RepoReady {
		return corral.SyncResult{}, corral.Errorf(corral.ECONFLICT, "the repository is %s, not ready", r.Status)
	}
	// The agent's lock of workspace writes, for the whole sync: no
	// decision applies (and commits) under it.
	defer c.lock(a.ID)()
	res, err := c.sync(ctx, a.ID, r)
	if err != nil {
		c.cfg.Log.Info("sync refused", "agent", a.ID, "ref", r.Ref, "by", actor.ID, "code", corral.ErrorCode(err), "err", err)
		// The trace keeps what the person was told, never git's own words.
		c.traceAgent(ctx, a.ID, trace.SyncRefused, map[string]any{"ref": r.Ref, "by": actor.ID, "code": corral.ErrorCode(err), "error": corral.ErrorMessage(err)})
		return corral.SyncResult{}, err
	}
	c.cfg.Log.Info("synced", "agent", a.ID, "ref", r.Ref, "status", res.Status, "head", res.Head, "rebased", res.Rebased, "by", actor.ID)
	c.traceAgent(ctx, a.ID, trace.Synced, map[string]any{"ref": r.Ref, "status": res.Status, "head": res.Head, "upstream": res.Upstream,
		"rebased": res.Rebased, "by": actor.ID})
	if cur, err := repos.cfg.Store.Repository(ctx, a.ID); err == nil {
		cur.Head, cur.UpdatedAt = res.Head, c.cfg.Now().UTC()
		if err := repos.cfg.Store.UpdateRepository(context.WithoutCancel(ctx), cur); err != nil {
			c.cfg.Log.Warn("recording a sync", "agent", a.ID, "err", err)
		}
	}
	return res, nil
}

// sync checks that nothing works on the workspace, then has the node
// sync it; the caller holds the agent's lock.
func (c *Repositories) sync(ctx context.Context, agentID string, r corral.Repository) (corral.SyncResult, error) {
	if r.Ref == "" {
		return corral.SyncResult{}, corral.Errorf(corral.ECONFLICT, "the repository tracks no branch: there is nothing to sync with")
	}
	runs, err := c.repos.cfg.Store.Runs(ctx, agentID, 5)
	if err != nil {
		return corral.SyncResult{}, err
	}
	for _, run := range runs {
		if corral.RunActive(run.Status) {
			return corral.SyncResult{}, corral.Errorf(corral.ECONFLICT, "run %s of the agent is %s: sync when it has ended", run.ID, run.Status)
		}
	}
	sets, err := c.store.ChangeSets(ctx, agentID)
	if err != nil {
		return corral.SyncResult{}, err
	}
	var pending []string
	for _, cs := range sets {
		if cs.Status == corral.ChangePending {
			pending = append(pending, cs.ID)
		}
	}
	var res corral.SyncResult
	err = c.withAuth(ctx, agentID, r.CredentialID, r.URL, func(auth *corral.GitAuth) error {
		var err error
		res, err = c.trees.Sync(ctx, agentID, corral.CloneSpec{URL: r.URL, Ref: r.Ref, Auth: auth})
		return err
	})
	res.Pending = pending
	return res, err
}
