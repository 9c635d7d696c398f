package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"corral"
	"corral/internal/trace"
)

var _ trace.Store = (*DB)(nil)

// AppendTrace appends one event. The table's triggers refuse an event that
// does not continue its run's chain, and any update or delete.
func (db *DB) AppendTrace(ctx context.Context, e trace.Event) error {
	const op = "sqlite.AppendTrace"
	_, err := db.exec(ctx, `
		INSERT INTO trace_events (run_id, seq, at, type, data, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.RunID, e.Seq, e.At.UTC().Format(time.RFC3339Nano), e.Type, string(e.Data), e.PrevHash, e.Hash)
	switch {
	case err == nil:
		return nil
	case isUnique(err), isRefused(err):
		return conflict("trace event does not continue its run's chain")
	default:
		return corral.Internal(op, err)
	}
}

// LastTrace returns the sequence number and hash of a run's last event.
func (db *DB) LastTrace(ctx context.Context, runID string) (int64, string, error) {
	var seq int64
	var hash string
	err := db.queryRow(ctx, `SELECT seq, hash FROM trace_events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", corral.Internal("sqlite.LastTrace", err)
	}
	return seq, hash, nil
}

// Trace returns a run's events in order.
func (db *DB) Trace(ctx context.Context, runID string) ([]trace.Event, error) {
	return db.TraceAfter(ctx, runID, 0)
}

// TraceAfter returns a run's events after the one numbered after, in
// order.
func (db *DB) TraceAfter(ctx context.Context, runID string, after int64) ([]trace.Event, error) {
	const op = "sqlite.Trace"
	rows, err := db.query(ctx, `
		SELECT run_id, seq, at, type, data, prev_hash, hash
		FROM trace_events WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, after)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	evs, err := collect(rows, func(s scanner) (trace.Event, error) {
		var e trace.Event
		var at, data string
		if err := s.Scan(&e.RunID, &e.Seq, &at, &e.Type, &data, &e.PrevHash, &e.Hash); err != nil {
			return e, err
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		e.At, e.Data = t, json.RawMessage(data)
		return e, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return evs, nil
}

// TraceRuns lists the runs that have a trace.
func (db *DB) TraceRuns(ctx context.Context) ([]string, error) {
	rows, err := db.query(ctx, `SELECT DISTINCT run_id FROM trace_events ORDER BY run_id`)
	if err != nil {
		return nil, corral.Internal("sqlite.TraceRuns", err)
	}
	ids, err := collect(rows, func(s scanner) (string, error) {
		var id string
		return id, s.Scan(&id)
	})
	if err != nil {
		return nil, corral.Internal("sqlite.TraceRuns", err)
	}
	return ids, nil
}
