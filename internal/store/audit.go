package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"corral"
)

var _ corral.AuditStore = (*DB)(nil)

// The audit log (migration 00023): account_events holds what happened to
// accounts and access, and audit gives it and trace_events one order. Its
// seq is assigned inside the write transaction, and write transactions
// are serial (one writer connection, BEGIN IMMEDIATE, SQLite's own lock
// across processes), so seq order is commit order: a reader that saw
// entry N saw every entry below it, and "after N" is an exact cursor.

// execer is what *sql.DB and *sql.Tx have in common for writes.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// recordAccount appends ev on w, the writer or one of its transactions:
// always the transaction that makes the change ev tells of, so the event
// is stored exactly when the change is.
func recordAccount(ctx context.Context, w execer, at time.Time, ev corral.AccountEvent) error {
	_, err := w.ExecContext(ctx, `
		INSERT INTO account_events (at, type, actor_id, user_id, agent_id, object, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		millis(at), ev.Type, ev.Actor, ev.User, ev.Agent, ev.Object, ev.Detail)
	return err
}

// write runs fn in a transaction of the writer and commits it.
func (db *DB) write(ctx context.Context, op string, fn func(tx *txn) error) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// maxAuditPage bounds one page of the audit log.
const maxAuditPage = 1000

// Audit returns at most limit entries of the log after seq after, in
// order (limit <= 0: 100; at most 1000).
func (db *DB) Audit(ctx context.Context, after int64, limit int) ([]corral.AuditEvent, error) {
	const op = "sqlite.Audit"
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxAuditPage)
	// One read transaction (one snapshot): the joins see the rows the
	// page's audit entries name.
	rows, err := db.query(ctx, `
		SELECT a.seq,
			t.run_id, t.seq, t.at, t.type, t.data, t.prev_hash, t.hash,
			e.at, e.type, e.actor_id, e.user_id, e.agent_id, e.object, e.detail
		FROM audit a
		LEFT JOIN trace_events t ON a.run_id IS NOT NULL AND t.run_id = a.run_id AND t.seq = a.trace_seq
		LEFT JOIN account_events e ON e.seq = a.account
		WHERE a.seq > ? ORDER BY a.seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	evs, err := collect(rows, scanAudit)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return evs, nil
}

func scanAudit(s scanner) (corral.AuditEvent, error) {
	var ev corral.AuditEvent
	var runID, tAt, tType, tData, tPrev, tHash sql.NullString
	var tSeq, eAt sql.NullInt64
	var eType, actor, user, agent, object, detail sql.NullString
	if err := s.Scan(&ev.Seq, &runID, &tSeq, &tAt, &tType, &tData, &tPrev, &tHash,
		&eAt, &eType, &actor, &user, &agent, &object, &detail); err != nil {
		return ev, err
	}
	if runID.Valid {
		at, err := time.Parse(time.RFC3339Nano, tAt.String)
		if err != nil {
			return ev, err
		}
		ev.Trace = &corral.TraceEvent{RunID: runID.String, Seq: tSeq.Int64, At: at, Type: tType.String,
			Data: json.RawMessage(tData.String), PrevHash: tPrev.String, Hash: tHash.String}
		return ev, nil
	}
	if !eType.Valid {
		return ev, fmt.Errorf("audit entry %d names no trace event and no account event", ev.Seq)
	}
	ev.Account = &corral.AccountEvent{At: fromMillis(eAt.Int64), Type: eType.String, Actor: actor.String,
		User: user.String, Agent: agent.String, Object: object.String, Detail: detail.String}
	return ev, nil
}
