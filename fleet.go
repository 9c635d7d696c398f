package corral

import (
	"context"
	"time"
)

// Sandbox nodes: machines that hold workspaces and run sandboxes for a
// control server, with no database and no keys. A node joins once with a
// one-time join token an admin makes, and from then on holds only a
// short-lived credential that control rotates over the relay.

// Node statuses, as GET /api/nodes answers them.
const (
	NodeReady    = "ready"    // connected; runs may be placed on it
	NodeDraining = "draining" // connected, but no new runs are placed on it
	NodeLost     = "lost"     // not connected now
)

// NodeLoad is how busy a sandbox node is, as the node itself counts: the
// sessions running on it now, and the most it takes (0: no bound).
type NodeLoad struct {
	Sessions    int
	MaxSessions int
}

// Full says whether the node takes no new session.
func (l NodeLoad) Full() bool { return l.MaxSessions > 0 && l.Sessions >= l.MaxSessions }

// NodeRecord is an enrolled sandbox node as control keeps it.
type NodeRecord struct {
	ID        string
	Name      string
	Draining  bool // an admin asked that no new runs go there
	LastSeen  time.Time
	CreatedAt time.Time
}

// NodeStore keeps enrolled nodes, their join tokens and their
// credentials, each by the hash of its secret.
type NodeStore interface {
	// CreateJoinToken stores a join token good until expires, once.
	CreateJoinToken(ctx context.Context, hash []byte, expires time.Time) error
	// Enroll consumes a live join token and stores the node with its first
	// credential, in one transaction: ENOTFOUND when the token is unknown,
	// used or expired.
	Enroll(ctx context.Context, tokenHash []byte, now time.Time, n NodeRecord, credHash []byte, credExpires time.Time) error
	// NodeByCredential returns the node a live credential belongs to:
	// ENOTFOUND for an unknown or expired one.
	NodeByCredential(ctx context.Context, hash []byte, now time.Time) (NodeRecord, error)
	// AddCredential gives a node one more credential (a rotation), and
	// forgets those expired at now.
	AddCredential(ctx context.Context, nodeID string, hash []byte, expires, now time.Time) error
	Nodes(ctx context.Context) ([]NodeRecord, error)
	// SetDraining marks a node draining or not: ENOTFOUND for no node.
	SetDraining(ctx context.Context, nodeID string, draining bool) error
	// NodeSeen records that the node was heard from at t.
	NodeSeen(ctx context.Context, nodeID string, t time.Time) error
	// AgentNode is the node that holds an agent's workspace, "" when it is
	// not placed yet; PlaceAgent places it there unless it is placed, and
	// returns where it is.
	AgentNode(ctx context.Context, agentID string) (string, error)
	PlaceAgent(ctx context.Context, agentID, nodeID string) (string, error)
	// MoveAgent moves an agent's placement from one node to another, if
	// it is still on from: ECONFLICT otherwise, ENOTFOUND for no agent or
	// no node to.
	MoveAgent(ctx context.Context, agentID, from, to string) error
	// SetRunNode records the node a run's session runs on.
	SetRunNode(ctx context.Context, runID, nodeID string) error
}
