package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"

	"corral"
)

// Page sizes of Messages.
const (
	defaultMessages = 100
	maxMessages     = 1000
)

// AddMessage appends a message to an agent's thread. Messages are ordered by
// when they were added, not by CreatedAt.
func (db *DB) AddMessage(ctx context.Context, m corral.Message) error {
	const op = "sqlite.AddMessage"
	if err := needID(op, m.ID); err != nil {
		return err
	}
	var author sql.NullString
	if m.Author != nil {
		author = sql.NullString{String: m.Author.ID, Valid: true}
	}
	sources, err := encodeSources(m.Sources)
	if err != nil {
		return corral.Internal(op, err)
	}
	_, err = db.exec(ctx, `
		INSERT INTO messages (id, agent_id, role, content, author_id, run_id, created_at, sources)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.AgentID, m.Role, m.Content, author, m.RunID, millis(db.orNow(m.CreatedAt)), sources)
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return db.missing(ctx, op, "agents", "agent", m.AgentID, "user")
	case isUnique(err):
		return conflict("message already exists")
	default:
		return corral.Internal(op, err)
	}
}

// Messages returns the last limit messages of an agent written before the
// message with id before (the newest when before is ""), oldest first.
// limit <= 0 means 100, and at most 1000 come back. ENOTFOUND "message"
// when before is not a message of this agent.
func (db *DB) Messages(ctx context.Context, agentID, before string, limit int) ([]corral.Message, error) {
	const op = "sqlite.Messages"
	if limit <= 0 {
		limit = defaultMessages
	}
	limit = min(limit, maxMessages)

	// Both reads in one transaction, so they see the same snapshot.
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rollback(tx)

	var beforeSeq int64 = math.MaxInt64
	if before != "" {
		err := tx.QueryRowContext(ctx,
			`SELECT seq FROM messages WHERE id = ? AND agent_id = ?`, before, agentID,
		).Scan(&beforeSeq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, corral.NotFound("message")
		case err != nil:
			return nil, corral.Internal(op, err)
		}
	}

	// The newest limit before the cursor, then turned oldest first.
	rows, err := tx.QueryContext(ctx, `
		SELECT id, agent_id, role, content, author_id, author_name, run_id, created_at, sources
		FROM (
			SELECT m.seq, m.id, m.agent_id, m.role, m.content, u.id AS author_id,
				u.name AS author_name, m.run_id, m.created_at, m.sources
			FROM messages m LEFT JOIN users u ON u.id = m.author_id
			WHERE m.agent_id = ? AND m.seq < ?
			ORDER BY m.seq DESC
			LIMIT ?
		) AS page
		ORDER BY seq`, agentID, beforeSeq, limit)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rows.Close()
	var msgs []corral.Message
	for rows.Next() {
		var m corral.Message
		var authorID, authorName sql.NullString
		var created int64
		var sources sql.NullString
		if err := rows.Scan(&m.ID, &m.AgentID, &m.Role, &m.Content,
			&authorID, &authorName, &m.RunID, &created, &sources); err != nil {
			return nil, corral.Internal(op, err)
		}
		if sources.Valid {
			if err := json.Unmarshal([]byte(sources.String), &m.Sources); err != nil {
				return nil, corral.Internal(op, err)
			}
		}
		if authorID.Valid {
			m.Author = &corral.UserRef{ID: authorID.String, Name: authorName.String}
		}
		m.CreatedAt = fromMillis(created)
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	return msgs, nil
}

// encodeSources is a message's sources as stored: NULL when there are none.
func encodeSources(s []corral.Source) (sql.NullString, error) {
	if len(s) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(s)
	return sql.NullString{String: string(b), Valid: true}, err
}
