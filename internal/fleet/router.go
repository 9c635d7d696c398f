package fleet

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/relay/noderpc"
)

// Placements is what routing needs of the store: where each agent's
// workspace is, a run's agent, and which nodes are draining.
type Placements interface {
	AgentNode(ctx context.Context, agentID string) (string, error)
	PlaceAgent(ctx context.Context, agentID, nodeID string) (string, error)
	MoveAgent(ctx context.Context, agentID, from, to string) error
	Run(ctx context.Context, id string) (corral.Run, error)
	Nodes(ctx context.Context) ([]corral.NodeRecord, error)
	SetRunNode(ctx context.Context, runID, nodeID string) error
}

// Router is the corral.Trees and corral.Sessions control's runner and
// services use in the split roles: each call goes to the node that holds the agent's
// workspace (a run's session, to its agent's), placing an agent not yet
// placed on the connected, undrained node with the fewest sessions. A
// call for an agent whose node is not connected is EUNAVAIL saying so,
// never an empty answer: control holds no worktree of its own.
//
// A session's calls ride out a node that is away for less than the
// grace: they wait for it to connect again, and the ones that may be
// made twice (Session, Exec of one command id, Output from an offset,
// Signal, EndSession) are made again when the relay broke under them.
// The session itself runs on meanwhile, held by the node's supervisor,
// so a partition or a node's restart shorter than the grace kills no run.
type Router struct {
	fleet *Fleet
	store Placements
	grace time.Duration

	mu       sync.Mutex
	sessions map[string]string            // run id → node id, of sessions started here
	stages   map[string]map[string]string // node id → open stage id → its agent
	// seen is the connection each node's open stages were last opened on:
	// a node that comes back (a new connection, maybe a new process) has
	// them opened again before any call reaches it, so none misses a
	// write to its workspace.
	seen   map[string]*member
	reopen map[string]*sync.Mutex // one reopening per node at a time
	// inflight counts the calls on each agent's workspace under way;
	// moving marks the agents whose workspace moves (Move).
	inflight map[string]int
	moving   map[string]bool
}

// DefaultGrace is how long a session's calls wait for its node.
const DefaultGrace = 2 * time.Minute

// NewRouter routes over the fleet's nodes; grace 0 is DefaultGrace.
func NewRouter(f *Fleet, store Placements, grace time.Duration) *Router {
	if grace <= 0 {
		grace = DefaultGrace
	}
	r := &Router{fleet: f, store: store, grace: grace, sessions: map[string]string{},
		stages: map[string]map[string]string{}, seen: map[string]*member{}, reopen: map[string]*sync.Mutex{},
		inflight: map[string]int{}, moving: map[string]bool{}}
	f.carries = r.carries
	return r
}

// carries says whether the session of a run is on the node: one this
// control started there, or (after a restart of control) one the run's
// record, else its agent's placement, puts there. It places nothing.
func (r *Router) carries(ctx context.Context, nodeID, runID string) bool {
	r.mu.Lock()
	id, ok := r.sessions[runID]
	r.mu.Unlock()
	if ok {
		return id == nodeID
	}
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return false
	}
	if run.Node != "" {
		return run.Node == nodeID
	}
	id, err = r.store.AgentNode(ctx, run.AgentID)
	return err == nil && id != "" && id == nodeID
}

var (
	_ corral.Trees    = (*Router)(nil)
	_ corral.Sessions = (*Router)(nil)
)

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

// ready is m's node once the node's open stages are open on it.
func (r *Router) ready(ctx context.Context, id string, m *member) (*noderpc.Client, error) {
	r.mu.Lock()
	if r.seen[id] == m {
		r.mu.Unlock()
		return m.node, nil
	}
	lock := r.reopen[id]
	if lock == nil {
		lock = &sync.Mutex{}
		r.reopen[id] = lock
	}
	r.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	r.mu.Lock()
	if r.seen[id] == m {
		r.mu.Unlock()
		return m.node, nil
	}
	open := map[string]string{}
	for stage, agent := range r.stages[id] {
		open[stage] = agent
	}
	r.mu.Unlock()
	for stage, agent := range open {
		if err := m.node.ReopenStage(ctx, agent, stage); err != nil && corral.ErrorCode(err) != corral.ENOTFOUND {
			return nil, err
		}
	}
	r.mu.Lock()
	r.seen[id] = m
	r.mu.Unlock()
	return m.node, nil
}

// opened and closed track the stages open on each node.
func (r *Router) opened(agentID, stageID string) {
	id, err := r.store.AgentNode(context.Background(), agentID)
	if err != nil || id == "" {
		return
	}
	r.mu.Lock()
	if r.stages[id] == nil {
		r.stages[id] = map[string]string{}
	}
	r.stages[id][stageID] = agentID
	r.mu.Unlock()
}

func (r *Router) closed(stageID string) {
	r.mu.Lock()
	for _, open := range r.stages {
		delete(open, stageID)
	}
	r.mu.Unlock()
}

// forAgent is the node of an agent, placing it first when it has none,
// and done, to call once the call made on it has returned: a move waits
// for no call, and no call starts while the agent's workspace moves.
func (r *Router) forAgent(ctx context.Context, agentID string) (corral.Trees, func(), error) {
	done, err := r.use(agentID)
	if err != nil {
		return nil, nil, err
	}
	id, err := r.store.AgentNode(ctx, agentID)
	if err == nil && id == "" {
		id, err = r.place(ctx, agentID)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	m, ok := r.fleet.await(ctx, id, 0) // connected now, or not
	if !ok {
		done()
		return nil, nil, unavailable(id)
	}
	n, err := r.ready(ctx, id, m)
	if err != nil {
		done()
		return nil, nil, err
	}
	return n, done, nil
}

// use counts a call on the agent's workspace in flight until done; it is
// refused while the workspace moves.
func (r *Router) use(agentID string) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moving[agentID] {
		return nil, corral.Errorf(corral.ECONFLICT, "the agent's workspace is moving to another sandbox node: try again once it has moved")
	}
	r.inflight[agentID]++
	return sync.OnceFunc(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.inflight[agentID]--; r.inflight[agentID] == 0 {
			delete(r.inflight, agentID)
		}
	}), nil
}

// place puts an agent on the ready node with room that runs the fewest
// sessions, as each node counts them itself.
func (r *Router) place(ctx context.Context, agentID string) (string, error) {
	recs, err := r.store.Nodes(ctx)
	if err != nil {
		return "", err
	}
	best, bestLoad := "", corral.NodeLoad{}
	var full []string
	for _, rec := range recs {
		if r.fleet.Status(rec) != corral.NodeReady {
			continue
		}
		load, err := r.Load(ctx, rec.ID)
		if err != nil {
			r.fleet.cfg.Log.Warn("a node's load not read: no agent placed there", "node", rec.ID, "err", err)
			continue
		}
		if load.Full() {
			full = append(full, rec.Name)
			continue
		}
		if best == "" || load.Sessions < bestLoad.Sessions {
			best, bestLoad = rec.ID, load
		}
	}
	if best == "" && len(full) > 0 {
		return "", corral.Errorf(corral.EADMISSION, "every ready sandbox node runs its most sessions (%s): try again when a run has ended, or add a node", strings.Join(full, ", "))
	}
	if best == "" {
		return "", errNoNodes
	}
	return r.store.PlaceAgent(ctx, agentID, best)
}

// Load is how busy a connected node is, as it counts (corral.NodeLoad).
func (r *Router) Load(ctx context.Context, nodeID string) (corral.NodeLoad, error) {
	m, ok := r.fleet.node(nodeID)
	if !ok {
		return corral.NodeLoad{}, unavailable(nodeID)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return m.node.Load(ctx)
}

// sessionNode is the node id of a run's session.
func (r *Router) sessionNode(ctx context.Context, runID string) (string, error) {
	r.mu.Lock()
	id, ok := r.sessions[runID]
	r.mu.Unlock()
	if ok {
		return id, nil
	}
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return "", err
	}
	id, err = r.store.AgentNode(ctx, run.AgentID)
	if err == nil && id == "" {
		id, err = r.place(ctx, run.AgentID)
	}
	return id, err
}

// onSession makes call on the node of a run's session, waiting for the
// node through the grace, and making call again when the relay broke
// under it if again (call may be made twice).
func (r *Router) onSession(ctx context.Context, runID string, again bool, call func(corral.Sessions) error) error {
	id, err := r.sessionNode(ctx, runID)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.grace)
	for {
		m, ok := r.fleet.await(ctx, id, r.grace)
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return unavailable(id)
		}
		n, err := r.ready(ctx, id, m)
		if err == nil {
			err = call(n)
		}
		if !again || !noderpc.Unreachable(err) || time.Now().After(deadline) {
			return err
		}
	}
}

// Trees: every call names its agent.

func (r *Router) Stage(ctx context.Context, spec corral.StageSpec) error {
	n, done, err := r.forAgent(ctx, spec.AgentID)
	if err != nil {
		return err
	}
	defer done()
	if err := n.Stage(ctx, spec); err != nil {
		return err
	}
	r.opened(spec.AgentID, spec.ID)
	return nil
}

func (r *Router) ReopenStage(ctx context.Context, agentID, stageID string) error {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer done()
	if err := n.ReopenStage(ctx, agentID, stageID); err != nil {
		return err
	}
	r.opened(agentID, stageID)
	return nil
}

func (r *Router) Manifest(ctx context.Context, agentID, stageID string, policy corral.ClassPolicy) (corral.StageManifest, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.StageManifest{}, err
	}
	defer done()
	m, err := n.Manifest(ctx, agentID, stageID, policy)
	if err == nil {
		r.closed(stageID) // the tree hears of no more writes (node.Local forgets it too)
	}
	return m, err
}

func (r *Router) Diffs(ctx context.Context, agentID, stageID string, entries []corral.ChangeEntry) ([]corral.ChangeEntry, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	defer done()
	return n.Diffs(ctx, agentID, stageID, entries)
}

func (r *Router) Apply(ctx context.Context, req corral.ApplyRequest) (corral.ApplyResult, error) {
	n, done, err := r.forAgent(ctx, req.AgentID)
	if err != nil {
		return corral.ApplyResult{}, err
	}
	defer done()
	return n.Apply(ctx, req)
}

// DiscardStage names no agent: it goes to every connected node (a tree
// that is not there is not an error), and fails only if one fails.
func (r *Router) DiscardStage(ctx context.Context, stageID string) error {
	r.closed(stageID)
	var errs []error
	for _, id := range r.fleet.Connected() {
		if m, ok := r.fleet.node(id); ok {
			errs = append(errs, m.node.DiscardStage(ctx, stageID))
		}
	}
	return errors.Join(errs...)
}

// DropAgent goes to every node, the agent's placement having gone with
// its record. A node that is not connected keeps what it held of the
// agent: the error names it, for the caller's log.
func (r *Router) DropAgent(ctx context.Context, agentID string) error {
	recs, err := r.store.Nodes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, rec := range recs {
		m, ok := r.fleet.node(rec.ID)
		if !ok {
			errs = append(errs, corral.Errorf(corral.EUNAVAIL, "the sandbox node %s is not connected: it keeps what it held of agent %s", rec.Name, agentID))
			continue
		}
		errs = append(errs, m.node.DropAgent(ctx, agentID))
	}
	return errors.Join(errs...)
}

func (r *Router) ReadFile(ctx context.Context, scope corral.FileScope, path string) ([]corral.FileInfo, []byte, error) {
	n, done, err := r.forAgent(ctx, scope.AgentID)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	return n.ReadFile(ctx, scope, path)
}

func (r *Router) WriteFile(ctx context.Context, w corral.FileWrite) (corral.CommitResult, error) {
	n, done, err := r.forAgent(ctx, w.AgentID)
	if err != nil {
		return corral.CommitResult{}, err
	}
	defer done()
	return n.WriteFile(ctx, w)
}

func (r *Router) DeleteFile(ctx context.Context, agentID, path string, recursive bool, commit *corral.CommitSpec) (corral.DeleteResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.DeleteResult{}, err
	}
	defer done()
	return n.DeleteFile(ctx, agentID, path, recursive, commit)
}

func (r *Router) Import(ctx context.Context, agentID, contentType string, body io.Reader, commit *corral.CommitSpec) (corral.ImportResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.ImportResult{}, err
	}
	defer done()
	return n.Import(ctx, agentID, contentType, body, commit)
}

func (r *Router) Archive(ctx context.Context, scope corral.FileScope, w io.Writer) error {
	n, done, err := r.forAgent(ctx, scope.AgentID)
	if err != nil {
		return err
	}
	defer done()
	return n.Archive(ctx, scope, w)
}

func (r *Router) ExportWorkspace(ctx context.Context, agentID string, w io.Writer) error {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer done()
	return n.ExportWorkspace(ctx, agentID, w)
}

func (r *Router) ImportWorkspace(ctx context.Context, agentID string, body io.Reader) error {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer done()
	return n.ImportWorkspace(ctx, agentID, body)
}

// Move carries an agent's workspace to another node: exported from its
// node as a tar, streamed through control into the other's
// ImportWorkspace (all or nothing there), the placement moved (compare and
// set), and then the old node's copy dropped. No call on the workspace
// may be under way (ECONFLICT), and none starts until the move has ended;
// the caller sees that no run works on it and no change set waits. A
// failed move leaves the agent where it was.
func (r *Router) Move(ctx context.Context, agentID, to string) error {
	from, err := r.store.AgentNode(ctx, agentID)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	recs, err := r.store.Nodes(ctx)
	if err != nil {
		return err
	}
	target := corral.NodeRecord{}
	for _, rec := range recs {
		if rec.ID == to {
			target = rec
		}
	}
	if target.ID == "" {
		return corral.Errorf(corral.ENOTFOUND, "no sandbox node %s", to)
	}
	if st := r.fleet.Status(target); st != corral.NodeReady {
		return corral.Errorf(corral.ECONFLICT, "the sandbox node %s is %s: a workspace moves only to a ready node", target.Name, st)
	}
	dst, ok := r.fleet.node(to)
	if !ok {
		return unavailable(to)
	}
	r.mu.Lock()
	if r.moving[agentID] || r.inflight[agentID] > 0 {
		r.mu.Unlock()
		return corral.Errorf(corral.ECONFLICT, "the agent's workspace is in use: try again in a moment")
	}
	r.moving[agentID] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.moving, agentID)
		r.mu.Unlock()
	}()
	if from == "" {
		// Never placed: there is nothing to carry.
		_, err := r.store.PlaceAgent(ctx, agentID, to)
		return err
	}
	src, ok := r.fleet.node(from)
	if !ok {
		return corral.Errorf(corral.EUNAVAIL, "the sandbox node %s, which holds this agent's workspace, is not connected: a workspace moves from a connected node", from)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(src.node.ExportWorkspace(ctx, agentID, pw)) }()
	err = dst.node.ImportWorkspace(ctx, agentID, pr)
	pr.CloseWithError(errors.New("the move ended"))
	if err != nil {
		return err
	}
	if err := r.store.MoveAgent(ctx, agentID, from, to); err != nil {
		dst.node.DropAgent(context.WithoutCancel(ctx), agentID)
		return err
	}
	if err := src.node.DropAgent(context.WithoutCancel(ctx), agentID); err != nil {
		r.fleet.cfg.Log.Error("a moved workspace's old copy not dropped", "agent", agentID, "node", from, "err", err)
	}
	return nil
}

func (r *Router) Clone(ctx context.Context, agentID string, spec corral.CloneSpec, progress func(int)) (corral.CloneResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.CloneResult{}, err
	}
	defer done()
	return n.Clone(ctx, agentID, spec, progress)
}

func (r *Router) CanClone(ctx context.Context, agentID string) error {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer done()
	return n.CanClone(ctx, agentID)
}

func (r *Router) Commit(ctx context.Context, agentID string, spec corral.CommitSpec) (corral.CommitResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.CommitResult{}, err
	}
	defer done()
	return n.Commit(ctx, agentID, spec)
}

func (r *Router) Log(ctx context.Context, agentID string, max int) ([]corral.GitCommit, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	defer done()
	return n.Log(ctx, agentID, max)
}

func (r *Router) Push(ctx context.Context, agentID, url, branch string, auth *corral.GitAuth) (corral.PushResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.PushResult{}, err
	}
	defer done()
	return n.Push(ctx, agentID, url, branch, auth)
}

func (r *Router) Sync(ctx context.Context, agentID string, spec corral.CloneSpec) (corral.SyncResult, error) {
	n, done, err := r.forAgent(ctx, agentID)
	if err != nil {
		return corral.SyncResult{}, err
	}
	defer done()
	return n.Sync(ctx, agentID, spec)
}

// Sessions: each names its run, whose agent names the node.

// StartSession waits for the node, but is not made twice: a start the
// relay broke under may have started the session. A draining node starts
// no new session: the run fails saying so.
func (r *Router) StartSession(ctx context.Context, spec corral.SessionSpec) error {
	id, err := r.sessionNode(ctx, spec.ID)
	if err != nil {
		return err
	}
	recs, err := r.store.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.ID == id && rec.Draining {
			return corral.Errorf(corral.EUNAVAIL, "the sandbox node %s, which holds this agent's workspace, is draining: it starts no new runs", rec.Name)
		}
	}
	err = r.onSession(ctx, spec.ID, false, func(n corral.Sessions) error { return n.StartSession(ctx, spec) })
	if err == nil {
		r.mu.Lock()
		r.sessions[spec.ID] = id
		r.mu.Unlock()
		if err := r.store.SetRunNode(ctx, spec.ID, id); err != nil {
			r.fleet.cfg.Log.Error("the run's node not recorded", "run", spec.ID, "node", id, "err", err)
		}
	}
	return err
}

func (r *Router) Session(ctx context.Context, id string) (st corral.SessionState, err error) {
	err = r.onSession(ctx, id, true, func(n corral.Sessions) (e error) { st, e = n.Session(ctx, id); return })
	return st, err
}

func (r *Router) Exec(ctx context.Context, sessionID string, c corral.Command) error {
	return r.onSession(ctx, sessionID, true, func(n corral.Sessions) error { return n.Exec(ctx, sessionID, c) })
}

func (r *Router) Output(ctx context.Context, sessionID, commandID string, offset int64, wait bool) (out corral.CommandOutput, err error) {
	err = r.onSession(ctx, sessionID, true, func(n corral.Sessions) (e error) {
		out, e = n.Output(ctx, sessionID, commandID, offset, wait)
		return
	})
	return out, err
}

func (r *Router) Signal(ctx context.Context, sessionID, commandID, signal string) error {
	return r.onSession(ctx, sessionID, true, func(n corral.Sessions) error { return n.Signal(ctx, sessionID, commandID, signal) })
}

func (r *Router) EndSession(ctx context.Context, id string) error {
	err := r.onSession(ctx, id, true, func(n corral.Sessions) error { return n.EndSession(ctx, id) })
	if err == nil {
		r.mu.Lock()
		delete(r.sessions, id)
		r.mu.Unlock()
	}
	return err
}

// Terminal waits for the node; a terminal is a live stream, never
// reopened behind its viewer's back.
func (r *Router) Terminal(ctx context.Context, sessionID string, cols, rows int) (t corral.Terminal, err error) {
	err = r.onSession(ctx, sessionID, false, func(n corral.Sessions) (e error) { t, e = n.Terminal(ctx, sessionID, cols, rows); return })
	return t, err
}
