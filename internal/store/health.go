package store

import (
	"context"
	"database/sql"
	"errors"

	"corral"
)

// Ping reads a page of the database: whether the store answers, for the
// server's readiness.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	err := db.queryRow(ctx, `SELECT 1 FROM runs LIMIT 1`).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return corral.Internal("sqlite.Ping", err)
	}
	return nil
}

// Counts is what the server's metrics read of the store at each scrape:
// the runs not ended (admitted, running or paused) and the change sets
// waiting for a decision. One statement, each count from an index
// (runs_status_seq, change_sets_pending), however many runs have ended.
func (db *DB) Counts(ctx context.Context) (runsActive, changeSetsPending int, err error) {
	err = db.queryRow(ctx, countsQuery).Scan(&runsActive, &changeSetsPending)
	if err != nil {
		return 0, 0, corral.Internal("sqlite.Counts", err)
	}
	return runsActive, changeSetsPending, nil
}

// countsQuery is Counts'. The active statuses are corral.RunActive's.
const countsQuery = `SELECT
	(SELECT COUNT(*) FROM runs WHERE status IN ('admitted', 'running', 'paused')),
	(SELECT COUNT(*) FROM change_sets WHERE status = 'pending')`
