package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"corral"
)

// CreateJoinToken stores a one-time join token for a sandbox node.
func (db *DB) CreateJoinToken(ctx context.Context, hash []byte, expires time.Time) error {
	if _, err := db.exec(ctx, `INSERT INTO node_join_tokens (token_hash, expires_at) VALUES (?, ?)`, hash, millis(expires)); err != nil {
		if isUnique(err) {
			return conflict("join token already exists")
		}
		return corral.Internal("sqlite.CreateJoinToken", err)
	}
	return nil
}

// Enroll consumes a live join token and stores the node with its first
// credential, in one transaction.
func (db *DB) Enroll(ctx context.Context, tokenHash []byte, now time.Time, n corral.NodeRecord, credHash []byte, credExpires time.Time) error {
	const op = "sqlite.Enroll"
	if err := needID(op, n.ID); err != nil {
		return err
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, name, created_at) VALUES (?, ?, ?)`, n.ID, n.Name, millis(now)); err != nil {
		if isUnique(err) {
			return conflict("node already exists")
		}
		return corral.Internal(op, err)
	}
	// The token is taken in the same statement that checks it, so two
	// joins with one token cannot both succeed.
	res, err := tx.ExecContext(ctx, `UPDATE node_join_tokens SET used_by = ?, used_at = ?
		WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?`, n.ID, millis(now), tokenHash, millis(now))
	if err != nil {
		return corral.Internal(op, err)
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return corral.NotFound("join token")
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO node_credentials (credential_hash, node_id, expires_at) VALUES (?, ?, ?)`,
		credHash, n.ID, millis(credExpires)); err != nil {
		return corral.Internal(op, err)
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

const nodeColumns = `n.id, n.name, n.draining, n.last_seen_at, n.created_at`

func scanNode(row interface{ Scan(...any) error }) (corral.NodeRecord, error) {
	var n corral.NodeRecord
	var seen sql.NullInt64
	var created int64
	if err := row.Scan(&n.ID, &n.Name, &n.Draining, &seen, &created); err != nil {
		return corral.NodeRecord{}, err
	}
	if seen.Valid {
		n.LastSeen = fromMillis(seen.Int64)
	}
	n.CreatedAt = fromMillis(created)
	return n, nil
}

// NodeByCredential returns the node a live credential belongs to.
func (db *DB) NodeByCredential(ctx context.Context, hash []byte, now time.Time) (corral.NodeRecord, error) {
	n, err := scanNode(db.queryRow(ctx, `SELECT `+nodeColumns+` FROM node_credentials c JOIN nodes n ON n.id = c.node_id
		WHERE c.credential_hash = ? AND c.expires_at > ?`, hash, millis(now)))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.NodeRecord{}, corral.NotFound("node")
	case err != nil:
		return corral.NodeRecord{}, corral.Internal("sqlite.NodeByCredential", err)
	}
	return n, nil
}

// AddCredential gives a node one more credential and forgets its expired
// ones.
func (db *DB) AddCredential(ctx context.Context, nodeID string, hash []byte, expires, now time.Time) error {
	const op = "sqlite.AddCredential"
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO node_credentials (credential_hash, node_id, expires_at) VALUES (?, ?, ?)`,
		hash, nodeID, millis(expires)); err != nil {
		if isForeignKey(err) {
			return corral.NotFound("node")
		}
		return corral.Internal(op, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM node_credentials WHERE node_id = ? AND expires_at <= ?`, nodeID, millis(now)); err != nil {
		return corral.Internal(op, err)
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// Nodes lists the enrolled nodes, oldest first.
func (db *DB) Nodes(ctx context.Context) ([]corral.NodeRecord, error) {
	rows, err := db.query(ctx, `SELECT `+nodeColumns+` FROM nodes n ORDER BY n.created_at, n.id`)
	if err != nil {
		return nil, corral.Internal("sqlite.Nodes", err)
	}
	defer rows.Close()
	var out []corral.NodeRecord
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, corral.Internal("sqlite.Nodes", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// SetDraining marks a node draining or not.
func (db *DB) SetDraining(ctx context.Context, nodeID string, draining bool) error {
	res, err := db.exec(ctx, `UPDATE nodes SET draining = ? WHERE id = ?`, draining, nodeID)
	if err != nil {
		return corral.Internal("sqlite.SetDraining", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return corral.NotFound("node")
	}
	return nil
}

// NodeSeen records when the node was last heard from; it never moves
// backwards.
func (db *DB) NodeSeen(ctx context.Context, nodeID string, t time.Time) error {
	if _, err := db.exec(ctx, `UPDATE nodes SET last_seen_at = ?1 WHERE id = ?2 AND (last_seen_at IS NULL OR last_seen_at < ?1)`, millis(t), nodeID); err != nil {
		return corral.Internal("sqlite.NodeSeen", err)
	}
	return nil
}

// AgentNode returns the node that holds an agent's workspace: "" when it
// is not placed yet; ENOTFOUND when there is no such agent.
func (db *DB) AgentNode(ctx context.Context, agentID string) (string, error) {
	var node sql.NullString
	err := db.queryRow(ctx, `SELECT node_id FROM agents WHERE id = ?`, agentID).Scan(&node)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", corral.NotFound("agent")
	case err != nil:
		return "", corral.Internal("sqlite.AgentNode", err)
	}
	return node.String, nil
}

// PlaceAgent places an agent on nodeID unless it is placed already, and
// returns where it is: two placements at once agree on the first.
func (db *DB) PlaceAgent(ctx context.Context, agentID, nodeID string) (string, error) {
	const op = "sqlite.PlaceAgent"
	if _, err := db.exec(ctx, `UPDATE agents SET node_id = ? WHERE id = ? AND node_id IS NULL`, nodeID, agentID); err != nil {
		if isForeignKey(err) {
			return "", corral.NotFound("node")
		}
		return "", corral.Internal(op, err)
	}
	return db.AgentNode(ctx, agentID)
}

// MoveAgent moves an agent's placement from one node to another, if it is
// still on from (compare and set).
func (db *DB) MoveAgent(ctx context.Context, agentID, from, to string) error {
	const op = "sqlite.MoveAgent"
	res, err := db.exec(ctx, `UPDATE agents SET node_id = ? WHERE id = ? AND node_id = ?`, to, agentID, from)
	if err != nil {
		if isForeignKey(err) {
			return corral.NotFound("node")
		}
		return corral.Internal(op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := db.AgentNode(ctx, agentID); err != nil {
			return err
		}
		return conflict("the agent is not on that node any more")
	}
	return nil
}

// SetRunNode records the node a run's session runs on.
func (db *DB) SetRunNode(ctx context.Context, runID, nodeID string) error {
	res, err := db.exec(ctx, `UPDATE runs SET node_id = ? WHERE id = ?`, nodeID, runID)
	if err != nil {
		return corral.Internal("sqlite.SetRunNode", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return corral.NotFound("run")
	}
	return nil
}

var _ corral.NodeStore = (*DB)(nil)
