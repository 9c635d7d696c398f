package service

import (
	"context"
	"time"

	"corral"
	"corral/internal/auth"
	"corral/internal/sanitize"
)

// Prefixes of a node's secrets, so one found where it should not be is
// recognisable: a join token (one use, an hour) and a node credential
// (hours, rotated).
const (
	joinPrefix       = "cnj"
	credentialPrefix = "cnc"
)

// NodesConfig holds the lifetimes of nodes' secrets.
type NodesConfig struct {
	JoinTTL       time.Duration // a join token's; default 1 hour
	CredentialTTL time.Duration // a node credential's; default 6 hours (control rotates it every hour)
	Now           func() time.Time
}

// Enrollment enrolls sandbox nodes and authenticates them: a node joins
// once with a join token an admin makes, and is then known by short-lived
// credentials. Only hashes are stored. The fleet authenticates its nodes'
// relays with it.
type Enrollment struct {
	store corral.NodeStore
	cfg   NodesConfig
}

// Nodes is what an admin does with the enrolled nodes: see how each is,
// drain one, move an agent to another.
type Nodes struct {
	store  corral.NodeStore
	live   func(context.Context, corral.NodeRecord) NodeLive
	checks MoveChecks
	move   func(ctx context.Context, agentID, nodeID string) error
}

// NodesDeps is what the admin's node use cases are built on.
type NodesDeps struct {
	Store corral.NodeStore
	// Live says how a node is now (the fleet's): its status and how many
	// sessions it holds.
	Live func(context.Context, corral.NodeRecord) NodeLive
	// Checks is what a move reads of an agent first; Move moves an agent's
	// workspace to another node (fleet.Router's).
	Checks MoveChecks
	Move   func(ctx context.Context, agentID, nodeID string) error
}

// NewNodes returns the admin's node use cases.
func NewNodes(d NodesDeps) *Nodes {
	return &Nodes{store: d.Store, live: d.Live, checks: d.Checks, move: d.Move}
}

// MoveChecks is what a move reads of an agent first: its runs and its
// change sets (corral.Store has them).
type MoveChecks interface {
	Runs(ctx context.Context, agentID string, limit int) ([]corral.Run, error)
	ChangeSets(ctx context.Context, agentID string) ([]corral.ChangeSet, error)
}

// MoveAgent moves an agent's workspace, and with it the agent, to another
// node, for an admin: draining a node, then moving its agents, empties it.
// Only an agent with no run under way and no change set waiting for
// review moves (a change set's staged tree stays on the node it was made
// on): ECONFLICT saying which.
func (s *Nodes) MoveAgent(ctx context.Context, actor corral.User, agentID, nodeID string) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an admin moves an agent between nodes")
	}
	if _, err := s.store.AgentNode(ctx, agentID); err != nil {
		return err
	}
	runs, err := s.checks.Runs(ctx, agentID, 5)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if corral.RunActive(r.Status) {
			return corral.Errorf(corral.ECONFLICT, "run %s of the agent is %s: stop it, or wait for it to end, before moving the agent", r.ID, r.Status)
		}
	}
	sets, err := s.checks.ChangeSets(ctx, agentID)
	if err != nil {
		return err
	}
	for _, cs := range sets {
		if cs.Status == corral.ChangePending {
			return corral.Errorf(corral.ECONFLICT, "change set %s of the agent waits for review: approve or reject it before moving the agent", cs.ID)
		}
	}
	return s.move(ctx, agentID, nodeID)
}

// NodeLive is how an enrolled node is now, as control sees it.
type NodeLive struct {
	Status string          // corral.NodeReady, NodeDraining or NodeLost
	Load   corral.NodeLoad // sessions (runs) it holds now, and its bound
	// Refused counts the connections made with the node's credential
	// while its relay was alive, refused (a copied credential, or the node
	// started twice), since control started; LastRefused is the last.
	Refused     int
	LastRefused time.Time
}

// NodeState is an enrolled node as an admin sees it.
type NodeState struct {
	corral.NodeRecord
	NodeLive
}

// NewEnrollment returns node enrollment.
func NewEnrollment(store corral.NodeStore, cfg NodesConfig) *Enrollment {
	if cfg.JoinTTL <= 0 {
		cfg.JoinTTL = time.Hour
	}
	if cfg.CredentialTTL <= 0 {
		cfg.CredentialTTL = 6 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Enrollment{store: store, cfg: cfg}
}

// JoinToken makes a one-time join token (`corral node token`, on the
// machine that holds control's data directory).
func (s *Enrollment) JoinToken(ctx context.Context) (string, time.Time, error) {
	token, hash := auth.NewToken(joinPrefix)
	expires := s.cfg.Now().Add(s.cfg.JoinTTL)
	return token, expires, s.store.CreateJoinToken(ctx, hash, expires)
}

// Join enrolls a node named name with a join token, which it uses up, and
// returns the node and its first credential. Every refusal is the same
// EUNAUTH: a token that never was, was used, or expired.
func (s *Enrollment) Join(ctx context.Context, token, name string) (corral.NodeRecord, string, time.Time, error) {
	name, err := sanitize.Name(name)
	if err != nil {
		return corral.NodeRecord{}, "", time.Time{}, err
	}
	if !auth.WellFormed(joinPrefix, token) {
		return corral.NodeRecord{}, "", time.Time{}, errJoin
	}
	now := s.cfg.Now()
	n := corral.NodeRecord{ID: corral.NewID("nod"), Name: name, CreatedAt: now}
	cred, hash := auth.NewToken(credentialPrefix)
	expires := now.Add(s.cfg.CredentialTTL)
	if err := s.store.Enroll(ctx, auth.HashToken(token), now, n, hash, expires); err != nil {
		if corral.ErrorCode(err) == corral.ENOTFOUND {
			return corral.NodeRecord{}, "", time.Time{}, errJoin
		}
		return corral.NodeRecord{}, "", time.Time{}, err
	}
	return n, cred, expires, nil
}

var errJoin = corral.Errorf(corral.EUNAUTH, "the join token is unknown, used or expired: make a new one with `corral node token` on control")

// Authenticate returns the node a live credential belongs to: EUNAUTH
// otherwise.
func (s *Enrollment) Authenticate(ctx context.Context, credential string) (corral.NodeRecord, error) {
	if !auth.WellFormed(credentialPrefix, credential) {
		return corral.NodeRecord{}, errCredential
	}
	n, err := s.store.NodeByCredential(ctx, auth.HashToken(credential), s.cfg.Now())
	if corral.ErrorCode(err) == corral.ENOTFOUND {
		return corral.NodeRecord{}, errCredential
	}
	return n, err
}

var errCredential = corral.Errorf(corral.EUNAUTH, "the node credential is unknown or expired: join the node again with a new join token")

// Rotate gives a node a new credential; the old ones stay good until they
// expire, so a node that misses the new one is not locked out.
func (s *Enrollment) Rotate(ctx context.Context, nodeID string) (string, time.Time, error) {
	cred, hash := auth.NewToken(credentialPrefix)
	now := s.cfg.Now()
	expires := now.Add(s.cfg.CredentialTTL)
	return cred, expires, s.store.AddCredential(ctx, nodeID, hash, expires, now)
}

// Seen records that a node was heard from now.
func (s *Enrollment) Seen(ctx context.Context, nodeID string) error {
	return s.store.NodeSeen(ctx, nodeID, s.cfg.Now())
}

// All lists the enrolled nodes for an admin, with how each is now.
func (s *Nodes) All(ctx context.Context, actor corral.User) ([]NodeState, error) {
	if !actor.Admin {
		return nil, corral.Errorf(corral.EFORBIDDEN, "only an admin sees the nodes")
	}
	recs, err := s.store.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeState, len(recs))
	for i, rec := range recs {
		out[i] = NodeState{NodeRecord: rec, NodeLive: s.live(ctx, rec)}
	}
	return out, nil
}

// Drain marks a node so that no new runs are placed on it (an admin).
func (s *Nodes) Drain(ctx context.Context, actor corral.User, nodeID string, draining bool) error {
	if !actor.Admin {
		return corral.Errorf(corral.EFORBIDDEN, "only an admin drains a node")
	}
	return s.store.SetDraining(ctx, nodeID, draining)
}
