package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"corral"
)

// copyOrder is every table, parents before children, but the three the
// audit log orders (trace_events, account_events, audit): Copy writes
// those in the log's own order.
var copyOrder = []string{
	"users", "sessions", "api_tokens", "invites", "nodes", "agents", "grants", "links", "link_members",
	"messages", "change_sets", "runs", "change_entries", "credentials", "repositories",
	"node_join_tokens", "node_credentials", "reservations", "admissions", "agent_secrets", "usage",
}

// identities are the tables whose seq is an identity on PostgreSQL: after
// rows are copied with their seq, the identity goes on from the largest.
var identities = []string{"messages", "runs", "admissions", "usage", "account_events", "audit"}

// CopyProgress reports a table copied so far.
type CopyProgress func(table string, rows int64)

// Copy copies every row of the SQLite store from into the PostgreSQL
// store to, which must hold nothing yet, in one transaction of to: a
// copy that fails leaves to empty. The audit log is rebuilt in its own
// order by to's triggers as each trace and account event is written, so
// its entries keep their order and, the log having no gaps, their seq.
// The caller keeps from's server stopped meanwhile (its data directory's
// lock), and verifies to's traces after.
func Copy(ctx context.Context, from, to *DB, progress CopyProgress) error {
	const op = "store.Copy"
	if from.pg || !to.pg {
		return corral.Errorf(corral.EINVALID, "a store is copied from SQLite to PostgreSQL")
	}
	if progress == nil {
		progress = func(string, int64) {}
	}
	src, err := from.beginRead(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(src)
	dst, err := to.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(dst)
	for _, table := range append(append([]string(nil), copyOrder...), "trace_events", "account_events", "audit") {
		var n int64
		if err := dst.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			return corral.Internal(op, err)
		}
		if n > 0 {
			return corral.Errorf(corral.ECONFLICT, "the PostgreSQL database already holds Corral data (%d rows in %s): copy into an empty one", n, table)
		}
	}
	for _, table := range copyOrder {
		n, err := copyRows(ctx, src, dst, table, `SELECT * FROM `+table+` ORDER BY rowid`)
		if err != nil {
			return corral.Internal(op, fmt.Errorf("%s: %w", table, err))
		}
		progress(table, n)
	}
	if err := copyAudited(ctx, src, dst, progress); err != nil {
		return corral.Internal(op, err)
	}
	for _, table := range identities {
		if _, err := dst.Tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('`+table+`', 'seq'),
			coalesce((SELECT max(seq) FROM `+table+`), 0) + 1, false)`); err != nil {
			return corral.Internal(op, fmt.Errorf("%s: %w", table, err))
		}
	}
	if err := dst.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// copyAudited writes the trace and account events in the audit log's
// order, so that to's triggers log them in it.
func copyAudited(ctx context.Context, src, dst *txn, progress CopyProgress) error {
	var traces, accounts int64
	var last int64
	for {
		// A page at a time: the source's snapshot holds still meanwhile.
		rows, err := src.QueryContext(ctx, `SELECT seq, run_id, trace_seq, account FROM audit WHERE seq > ? ORDER BY seq LIMIT 1000`, last)
		if err != nil {
			return err
		}
		type entry struct {
			run      sql.NullString
			traceSeq sql.NullInt64
			account  sql.NullInt64
		}
		var page []entry
		for rows.Next() {
			var e entry
			if err := rows.Scan(&last, &e.run, &e.traceSeq, &e.account); err != nil {
				rows.Close()
				return err
			}
			page = append(page, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			var n int64
			if e.account.Valid {
				n, err = copyRows(ctx, src, dst, "account_events", `SELECT * FROM account_events WHERE seq = ?`, e.account.Int64)
				accounts += n
			} else {
				n, err = copyRows(ctx, src, dst, "trace_events", `SELECT * FROM trace_events WHERE run_id = ? AND seq = ?`, e.run.String, e.traceSeq.Int64)
				traces += n
			}
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("audit entry %d names an event the store does not hold", last)
			}
		}
		progress("trace_events", traces)
		progress("account_events", accounts)
	}
	// Every event has its entry (migration 00023 logged those before it):
	// one that has none would be lost here, so say so.
	var missing int64
	if err := src.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM trace_events) + (SELECT count(*) FROM account_events)`).Scan(&missing); err != nil {
		return err
	}
	if missing != traces+accounts {
		return fmt.Errorf("the audit log names %d events and the store holds %d", traces+accounts, missing)
	}
	return nil
}

// copyRows copies the rows query reads from src into table on dst, every
// column by name, and returns how many.
func copyRows(ctx context.Context, src, dst *txn, table, query string, args ...any) (int64, error) {
	rows, err := src.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	marks := make([]string, len(cols))
	for i := range marks {
		marks[i] = "?"
	}
	insert := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(marks, ", ") + `)`
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		if _, err := dst.ExecContext(ctx, insert, vals...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}
