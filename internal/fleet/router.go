package fleet

import (
	"context"
	"errors"
	"io"
	"sync"

	"corral"
)

// Placements is what routing needs of the store: where each agent's
// workspace is, a run's agent, and which nodes are draining.
type Placements interface {
	AgentNode(ctx context.Context, agentID string) (string, error)
	PlaceAgent(ctx context.Context, agentID, nodeID string) (string, error)
	Run(ctx context.Context, id string) (corral.Run, error)
	Nodes(ctx context.Context) ([]corral.NodeRecord, error)
}

// Router is the corral.Node control's runner and services use in the
// split roles: each call goes to the node that holds the agent's
// workspace (a run's session, to its agent's), placing an agent not yet
// placed on the connected, undrained node with the fewest sessions. A
// call for an agent whose node is not connected is EUNAVAIL saying so,
// never an empty answer: control holds no worktree of its own.
type Router struct {
	fleet *Fleet
	store Placements

	mu       sync.Mutex
	sessions map[string]string // run id → node id, of sessions started here
}

// NewRouter routes over the fleet's nodes.
func NewRouter(f *Fleet, store Placements) *Router {
	return &Router{fleet: f, store: store, sessions: map[string]string{}}
}

var _ corral.Node = (*Router)(nil)

func unavailable(nodeID string) error {
	return corral.Errorf(corral.EUNAVAIL, "the sandbox node %s, which holds this agent's workspace, is not connected", nodeID)
}

var errNoNodes = corral.Errorf(corral.EUNAVAIL, "no sandbox node is connected and ready: start one with corral serve --role sandbox")

// Sessions is how many sessions this control started on the node that
// are not ended yet.
func (r *Router) Sessions(nodeID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range r.sessions {
		if id == nodeID {
			n++
		}
	}
	return n
}

// forAgent is the node of an agent, placing it first when it has none.
func (r *Router) forAgent(ctx context.Context, agentID string) (corral.Node, error) {
	id, err := r.store.AgentNode(ctx, agentID)
	if err != nil {
		return nil, err
	}
	if id == "" {
		if id, err = r.place(ctx, agentID); err != nil {
			return nil, err
		}
	}
	m, ok := r.fleet.node(id)
	if !ok {
		return nil, unavailable(id)
	}
	return m.node, nil
}

// place puts an agent on the ready node with the fewest sessions.
func (r *Router) place(ctx context.Context, agentID string) (string, error) {
	recs, err := r.store.Nodes(ctx)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	load := map[string]int{}
	for _, n := range r.sessions {
		load[n]++
	}
	r.mu.Unlock()
	best := ""
	for _, rec := range recs {
		if r.fleet.Status(rec) != corral.NodeReady {
			continue
		}
		if best == "" || load[rec.ID] < load[best] {
			best = rec.ID
		}
	}
	if best == "" {
		return "", errNoNodes
	}
	return r.store.PlaceAgent(ctx, agentID, best)
}

// forSession is the node of a run's session.
func (r *Router) forSession(ctx context.Context, runID string) (corral.Node, error) {
	r.mu.Lock()
	id, ok := r.sessions[runID]
	r.mu.Unlock()
	if ok {
		m, up := r.fleet.node(id)
		if !up {
			return nil, unavailable(id)
		}
		return m.node, nil
	}
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	return r.forAgent(ctx, run.AgentID)
}

// Trees: every call names its agent.

func (r *Router) Stage(ctx context.Context, spec corral.StageSpec) error {
	n, err := r.forAgent(ctx, spec.AgentID)
	if err != nil {
		return err
	}
	return n.Stage(ctx, spec)
}

func (r *Router) ReopenStage(ctx context.Context, agentID, stageID string) error {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	return n.ReopenStage(ctx, agentID, stageID)
}

func (r *Router) Manifest(ctx context.Context, agentID, stageID string, policy corral.ClassPolicy) (corral.StageManifest, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.StageManifest{}, err
	}
	return n.Manifest(ctx, agentID, stageID, policy)
}

func (r *Router) Diffs(ctx context.Context, agentID, stageID string, entries []corral.ChangeEntry) ([]corral.ChangeEntry, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	return n.Diffs(ctx, agentID, stageID, entries)
}

func (r *Router) Apply(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
	n, err := r.forAgent(ctx, req.AgentID)
	if err != nil {
		return corral.ApplyResult{}, err
	}
	return n.Apply(ctx, req)
}

// DiscardStage names no agent: it goes to every connected node (a tree
// that is not there is not an error), and fails only if one fails.
func (r *Router) DiscardStage(ctx context.Context, stageID string) error {
	var errs []error
	for _, id := range r.fleet.Connected() {
		if m, ok := r.fleet.node(id); ok {
			errs = append(errs, m.node.DiscardStage(ctx, stageID))
		}
	}
	return errors.Join(errs...)
}

func (r *Router) ReadFile(ctx context.Context, scope corral.FileScope, path string) ([]corral.FileInfo, []byte, error) {
	n, err := r.forAgent(ctx, scope.AgentID)
	if err != nil {
		return nil, nil, err
	}
	return n.ReadFile(ctx, scope, path)
}

func (r *Router) WriteFile(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error) {
	n, err := r.forAgent(ctx, w.AgentID)
	if err != nil {
		return corral.CommitResult{}, err
	}
	return n.WriteFile(ctx, w)
}

func (r *Router) DeleteFile(ctx context.Context, agentID, path string, recursive bool, commit *corral.CommitSpec) (corral.DeleteResult, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.DeleteResult{}, err
	}
	return n.DeleteFile(ctx, agentID, path, recursive, commit)
}

func (r *Router) Import(ctx context.Context, agentID, contentType string, body io.Reader, commit *corral.CommitSpec) (corral.ImportResult, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.ImportResult{}, err
	}
	return n.Import(ctx, agentID, contentType, body, commit)
}

func (r *Router) Archive(ctx context.Context, scope corral.FileScope, w io.Writer) error {
	n, err := r.forAgent(ctx, scope.AgentID)
	if err != nil {
		return err
	}
	return n.Archive(ctx, scope, w)
}

// Recover is each node's, done by the node itself when it starts, before
// it connects: nothing is left for control to do.
func (r *Router) Recover(ctx context.Context) error { return nil }

func (r *Router) Clone(ctx context.Context, agentID string, spec corral.CloneSpec, progress func(int)) (corral.CloneResult, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.CloneResult{}, err
	}
	return n.Clone(ctx, agentID, spec, progress)
}

func (r *Router) CanClone(ctx context.Context, agentID string) error {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	return n.CanClone(ctx, agentID)
}

func (r *Router) Commit(ctx context.Context, agentID string, spec corral.CommitSpec) (corral.CommitResult, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.CommitResult{}, err
	}
	return n.Commit(ctx, agentID, spec)
}

func (r *Router) Log(ctx context.Context, agentID string, max int) ([]corral.GitCommit, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	return n.Log(ctx, agentID, max)
}

func (r *Router) Push(ctx context.Context, agentID, url, branch string, auth *corral.GitAuth) (corral.PushResult, error) {
	n, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.PushResult{}, err
	}
	return n.Push(ctx, agentID, url, branch, auth)
}

// Sessions: each names its run, whose agent names the node.

func (r *Router) StartSession(ctx context.Context, spec corral.SessionSpec) error {
	run, err := r.store.Run(ctx, spec.ID)
	if err != nil {
		return err
	}
	id, err := r.store.AgentNode(ctx, run.AgentID)
	if err != nil {
		return err
	}
	if id == "" {
		if id, err = r.place(ctx, run.AgentID); err != nil {
			return err
		}
	}
	m, ok := r.fleet.node(id)
	if !ok {
		return unavailable(id)
	}
	if err := m.node.StartSession(ctx, spec); err != nil {
		return err
	}
	r.mu.Lock()
	r.sessions[spec.ID] = id
	r.mu.Unlock()
	return nil
}

func (r *Router) Session(ctx context.Context, id string) (corral.SessionState, error) {
	n, err := r.forSession(ctx, id)
	if err != nil {
		return corral.SessionState{}, err
	}
	return n.Session(ctx, id)
}

func (r *Router) Exec(ctx context.Context, sessionID string, c corral.Command) error {
	n, err := r.forSession(ctx, sessionID)
	if err != nil {
		return err
	}
	return n.Exec(ctx, sessionID, c)
}

func (r *Router) Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (corral.CommandOutput, error) {
	n, err := r.forSession(ctx, sessionID)
	if err != nil {
		return corral.CommandOutput{}, err
	}
	return n.Output(ctx, sessionID, commandID, offset, wait)
}

func (r *Router) Signal(ctx context.Context, sessionID, commandID, signal string) error {
	n, err := r.forSession(ctx, sessionID)
	if err != nil {
		return err
	}
	return n.Signal(ctx, sessionID, commandID, signal)
}

func (r *Router) EndSession(ctx context.Context, id string) error {
	n, err := r.forSession(ctx, id)
	if err != nil {
		return err
	}
	err = n.EndSession(ctx, id)
	if err == nil {
		r.mu.Lock()
		delete(r.sessions, id)
		r.mu.Unlock()
	}
	return err
}

func (r *Router) Terminal(ctx context.Context, sessionID string, cols, rows int) (corral.Terminal, error) {
	n, err := r.forSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return n.Terminal(ctx, sessionID, cols, rows)
}
