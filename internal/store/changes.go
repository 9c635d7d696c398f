package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"corral"
)

var _ corral.ChangeStore = (*DB)(nil)

// CreateChangeSet stores a change set and its entries in one transaction.
func (db *DB) CreateChangeSet(ctx context.Context, cs corral.ChangeSet) error {
	const op = "sqlite.CreateChangeSet"
	if err := needID(op, cs.ID); err != nil {
		return err
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `
		INSERT INTO change_sets (id, agent_id, run_id, status, mode, created_at, expires_at, disk_bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		cs.ID, cs.AgentID, cs.RunID, cs.Status, cs.Mode, millis(cs.CreatedAt), millis(cs.ExpiresAt), cs.DiskBytes)
	switch {
	case isForeignKey(err):
		return corral.NotFound("agent")
	case isUnique(err):
		return conflict("change set already exists")
	case err != nil:
		return corral.Internal(op, err)
	}
	for _, e := range cs.Entries {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO change_entries (change_set_id, path, op, old_sha256, new_sha256, size, mode, old_mode, class, flags, state, note, diff)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			cs.ID, tx.bytes(e.Path), e.Op, e.OldSHA256, e.NewSHA256, e.Size, int64(e.Mode), int64(e.OldMode), e.Class,
			strings.Join(e.Flags, ","), e.State, tx.bytes(e.Note), tx.bytes(e.Diff)); err != nil {
			return corral.Internal(op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

const changeSetColumns = `c.id, c.agent_id, c.run_id, c.status, c.mode, c.created_at, c.expires_at,
	c.decided_at, u.id, u.name, c.disk_bytes`

func scanChangeSet(s scanner) (corral.ChangeSet, error) {
	var cs corral.ChangeSet
	var created, expires int64
	var decidedAt sql.NullInt64
	var byID, byName sql.NullString
	if err := s.Scan(&cs.ID, &cs.AgentID, &cs.RunID, &cs.Status, &cs.Mode, &created, &expires,
		&decidedAt, &byID, &byName, &cs.DiskBytes); err != nil {
		return corral.ChangeSet{}, err
	}
	cs.CreatedAt, cs.ExpiresAt, cs.DecidedAt = fromMillis(created), fromMillis(expires), fromNullMillis(decidedAt)
	if byID.Valid {
		cs.DecidedBy = &corral.UserRef{ID: byID.String, Name: byName.String}
	}
	return cs, nil
}

// ChangeSet returns one change set with its entries.
func (db *DB) ChangeSet(ctx context.Context, id string) (corral.ChangeSet, error) {
	const op = "sqlite.ChangeSet"
	cs, err := scanChangeSet(db.queryRow(ctx, `SELECT `+changeSetColumns+`
		FROM change_sets c LEFT JOIN users u ON u.id = c.decided_by WHERE c.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return corral.ChangeSet{}, corral.NotFound("change set")
	}
	if err != nil {
		return corral.ChangeSet{}, corral.Internal(op, err)
	}
	sets, err := db.withEntries(ctx, []corral.ChangeSet{cs}, true)
	if err != nil {
		return corral.ChangeSet{}, corral.Internal(op, err)
	}
	return sets[0], nil
}

// ChangeSets lists an agent's change sets, newest first.
func (db *DB) ChangeSets(ctx context.Context, agentID string) ([]corral.ChangeSet, error) {
	return db.changeSets(ctx, "sqlite.ChangeSets", `SELECT `+changeSetColumns+`
		FROM change_sets c LEFT JOIN users u ON u.id = c.decided_by
		WHERE c.agent_id = ? ORDER BY c.created_at DESC, c.id DESC`, agentID)
}

// PendingChangeSets lists every change set still waiting, oldest first.
func (db *DB) PendingChangeSets(ctx context.Context) ([]corral.ChangeSet, error) {
	return db.changeSets(ctx, "sqlite.PendingChangeSets", `SELECT `+changeSetColumns+`
		FROM change_sets c LEFT JOIN users u ON u.id = c.decided_by
		WHERE c.status = 'pending' ORDER BY c.created_at, c.id`)
}

// WaitingChangeSets lists the pending change sets of the agents named,
// newest first, each with its agent's name and its entries counted: an
// inbox, in one query whatever the number of agents. Which agents to ask
// about is the caller's decision (the access policy), not the store's.
func (db *DB) WaitingChangeSets(ctx context.Context, agentIDs []string) ([]corral.WaitingChangeSet, error) {
	const op = "sqlite.WaitingChangeSets"
	if len(agentIDs) == 0 {
		return []corral.WaitingChangeSet{}, nil
	}
	ids, err := json.Marshal(agentIDs)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	each := `json_each(?)`
	if db.pg {
		each = `json_array_elements_text(?::json)`
	}
	rows, err := db.query(ctx, `SELECT `+waitingColumns+`
		FROM change_sets c JOIN agents a ON a.id = c.agent_id
		WHERE c.status = 'pending' AND c.agent_id IN (SELECT value FROM `+each+`)
		ORDER BY c.created_at DESC, c.id DESC`, string(ids))
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	sets, err := collect(rows, scanWaiting)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return sets, nil
}

// LargestPendingChangeSets lists the pending change sets of the agents
// ownerID owns that hold the most disk, largest first, at most limit
// (<= 0: 5): what a person can decide to free what they hold. CROSS JOIN
// and INDEXED BY read the owner's agents first (agents_owner_id), then
// each one's pending sets (change_sets_pending_disk), however many other
// people's wait: the planner, without statistics, would take every
// pending set for each agent.
func (db *DB) LargestPendingChangeSets(ctx context.Context, ownerID string, limit int) ([]corral.WaitingChangeSet, error) {
	const op = "sqlite.LargestPendingChangeSets"
	if limit <= 0 {
		limit = 5
	}
	rows, err := db.query(ctx, largestPendingQuery, ownerID, limit)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	sets, err := collect(rows, scanWaiting)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return sets, nil
}

// largestPendingQuery lists an owner's (?1) largest pending change sets,
// at most ?2.
const largestPendingQuery = `SELECT ` + waitingColumns + `
	FROM agents a CROSS JOIN change_sets c INDEXED BY change_sets_pending_disk ON c.agent_id = a.id
	WHERE a.owner_id = ?1 AND c.status = 'pending'
	ORDER BY c.disk_bytes DESC, c.id LIMIT ?2`

// waitingColumns selects a waiting change set from change_sets c joined
// with its agent a, its entries counted; scanWaiting reads them.
const waitingColumns = `c.id, c.agent_id, a.name, c.run_id, c.created_at, c.expires_at,
	(SELECT count(*) FROM change_entries e WHERE e.change_set_id = c.id AND e.state = 'pending'),
	(SELECT count(*) FROM change_entries e WHERE e.change_set_id = c.id),
	c.disk_bytes`

func scanWaiting(s scanner) (corral.WaitingChangeSet, error) {
	var w corral.WaitingChangeSet
	var created, expires int64
	err := s.Scan(&w.ID, &w.AgentID, &w.AgentName, &w.RunID, &created, &expires, &w.Pending, &w.Entries, &w.DiskBytes)
	w.CreatedAt, w.ExpiresAt = fromMillis(created), fromMillis(expires)
	return w, err
}

func (db *DB) changeSets(ctx context.Context, op, query string, args ...any) ([]corral.ChangeSet, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	sets, err := collect(rows, scanChangeSet)
	if err == nil {
		sets, err = db.withEntries(ctx, sets, false)
	}
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return sets, nil
}

// withEntries fills the entries of each change set, sorted by path; their
// diffs only when diffs is true (one change set, not a list).
func (db *DB) withEntries(ctx context.Context, sets []corral.ChangeSet, diffs bool) ([]corral.ChangeSet, error) {
	diffCol := "''"
	if db.pg {
		diffCol = "''::bytea"
	}
	if diffs {
		diffCol = "diff"
	}
	for i := range sets {
		rows, err := db.query(ctx, `
			SELECT path, op, old_sha256, new_sha256, size, mode, old_mode, class, flags, state, note, `+diffCol+`
			FROM change_entries WHERE change_set_id = ? ORDER BY path`, sets[i].ID)
		if err != nil {
			return nil, err
		}
		sets[i].Entries, err = collect(rows, func(s scanner) (corral.ChangeEntry, error) {
			var e corral.ChangeEntry
			var mode, oldMode int64
			var flags string
			err := s.Scan(&e.Path, &e.Op, &e.OldSHA256, &e.NewSHA256, &e.Size, &mode, &oldMode, &e.Class, &flags, &e.State, &e.Note, &e.Diff)
			e.Mode, e.OldMode = uint32(mode), uint32(oldMode)
			if flags != "" {
				e.Flags = strings.Split(flags, ",")
			}
			return e, err
		})
		if err != nil {
			return nil, err
		}
	}
	return sets, nil
}

// UpdateChangeSet records a decision: status, who and when, and each
// entry's state, only if the stored status is still from and every entry
// it changes is still pending.
func (db *DB) UpdateChangeSet(ctx context.Context, cs corral.ChangeSet, from corral.ChangeStatus) error {
	const op = "sqlite.UpdateChangeSet"
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer tx.Rollback()
	var decidedBy sql.NullString
	if cs.DecidedBy != nil {
		decidedBy = sql.NullString{String: cs.DecidedBy.ID, Valid: true}
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE change_sets SET status = ?, decided_by = ?, decided_at = ?
		WHERE id = ? AND status = ?`,
		cs.Status, decidedBy, nullMillis(cs.DecidedAt), cs.ID, from)
	if err != nil {
		return corral.Internal(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return corral.Internal(op, err)
	} else if n == 0 {
		return conflict("the change set was decided meanwhile")
	}
	// An entry leaves pending once: a writer that read an older state can
	// decide what is still pending, never undo what was decided.
	for _, e := range cs.Entries {
		res, err := tx.ExecContext(ctx, `UPDATE change_entries SET state = ?
			WHERE change_set_id = ? AND path = ? AND (state = 'pending' OR state = ?)`,
			e.State, cs.ID, tx.bytes(e.Path), e.State)
		if err != nil {
			return corral.Internal(op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return corral.Internal(op, err)
		} else if n == 0 {
			return conflict("the change set was decided meanwhile")
		}
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}
