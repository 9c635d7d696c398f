package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"corral"
)

var _ corral.RepositoryStore = (*DB)(nil)

// CreateRepository stores a new repository row, replacing only a failed
// one: a clone cloning or done is never overwritten by a second PUT.
func (db *DB) CreateRepository(ctx context.Context, r corral.Repository) error {
	const op = "sqlite.CreateRepository"
	now := millis(db.orNow(r.CreatedAt))
	res, err := db.exec(ctx, `
		INSERT INTO repositories (agent_id, url, ref, credential_id, status, created_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id) DO UPDATE SET
			url = excluded.url, ref = excluded.ref, credential_id = excluded.credential_id,
			head = '', status = excluded.status, error = '', pending = '[]',
			created_by = excluded.created_by, created_at = excluded.created_at, updated_at = excluded.updated_at,
			push_branch = '', push_head = '', push_at = NULL, push_by = '', push_by_name = ''
		WHERE repositories.status = 'failed'`,
		r.AgentID, r.URL, r.Ref, r.CredentialID, r.Status, r.CreatedBy, now, now)
	switch {
	case isForeignKey(err):
		return corral.NotFound("agent")
	case err != nil:
		return corral.Internal(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return corral.Internal(op, err)
	}
	if n == 0 {
		return conflict("the agent already has a repository")
	}
	return nil
}

const repoColumns = `agent_id, url, ref, credential_id, head, status, error, pending, created_by, created_at, updated_at,
	push_branch, push_head, push_at, push_by, push_by_name`

// Repository returns an agent's repository.
func (db *DB) Repository(ctx context.Context, agentID string) (corral.Repository, error) {
	var r corral.Repository
	var pending, pushBranch, pushHead, pushBy, pushByName string
	var created, updated int64
	var pushAt sql.NullInt64
	err := db.queryRow(ctx, `SELECT `+repoColumns+` FROM repositories WHERE agent_id = ?`, agentID).Scan(
		&r.AgentID, &r.URL, &r.Ref, &r.CredentialID, &r.Head, &r.Status, &r.Error, &pending, &r.CreatedBy, &created, &updated,
		&pushBranch, &pushHead, &pushAt, &pushBy, &pushByName)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.Repository{}, corral.NotFound("repository")
	case err != nil:
		return corral.Repository{}, corral.Internal("sqlite.Repository", err)
	}
	if err := json.Unmarshal([]byte(pending), &r.Pending); err != nil {
		return corral.Repository{}, corral.Internal("sqlite.Repository", err)
	}
	r.CreatedAt, r.UpdatedAt = fromMillis(created), fromMillis(updated)
	if pushBranch != "" {
		r.LastPush = &corral.Push{Branch: pushBranch, Head: pushHead, At: fromNullMillis(pushAt), By: corral.UserRef{ID: pushBy, Name: pushByName}}
	}
	return r, nil
}

// UpdateRepository writes what a clone, a commit or a push changed.
func (db *DB) UpdateRepository(ctx context.Context, r corral.Repository) error {
	const op = "sqlite.UpdateRepository"
	pending := r.Pending
	if pending == nil {
		pending = []string{}
	}
	pj, err := json.Marshal(pending)
	if err != nil {
		return corral.Internal(op, err)
	}
	var push corral.Push
	if r.LastPush != nil {
		push = *r.LastPush
	}
	res, err := db.exec(ctx, `
		UPDATE repositories SET ref = ?, head = ?, status = ?, error = ?, pending = ?, updated_at = ?,
			push_branch = ?, push_head = ?, push_at = ?, push_by = ?, push_by_name = ?
		WHERE agent_id = ?`,
		r.Ref, r.Head, r.Status, r.Error, string(pj), millis(db.orNow(r.UpdatedAt)),
		push.Branch, push.Head, nullMillis(push.At), push.By.ID, push.By.Name, r.AgentID)
	if err != nil {
		return corral.Internal(op, err)
	}
	return rowsAffected(op, "repository", res)
}

// FailCloning marks every clone in progress failed: after a restart none is.
func (db *DB) FailCloning(ctx context.Context, msg string, now time.Time) ([]string, error) {
	const op = "sqlite.FailCloning"
	var ids []string
	err := db.write(ctx, op, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `
			UPDATE repositories SET status = 'failed', error = ?, updated_at = ?
			WHERE status = 'cloning' RETURNING agent_id`, msg, millis(db.orNow(now)))
		if err != nil {
			return corral.Internal(op, err)
		}
		ids, err = collect(rows, func(s scanner) (string, error) {
			var id string
			err := s.Scan(&id)
			return id, err
		})
		if err != nil {
			return corral.Internal(op, err)
		}
		return nil
	})
	return ids, err
}

// Identity answers only the two fields a commit records.
func (db *DB) Identity(ctx context.Context, userID string) (corral.Identity, error) {
	var id corral.Identity
	err := db.queryRow(ctx, `SELECT name, email FROM users WHERE id = ?`, userID).Scan(&id.Name, &id.Email)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.Identity{}, corral.NotFound("user")
	case err != nil:
		return corral.Identity{}, corral.Internal("sqlite.Identity", err)
	}
	return id, nil
}
