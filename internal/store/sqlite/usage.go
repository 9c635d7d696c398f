package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"
	"time"

	"corral"
)

var (
	_ corral.UsageStore  = (*DB)(nil)
	_ corral.BudgetStore = (*DB)(nil)
)

// dayMillis is one UTC day: usage's at is unix milliseconds, so at /
// dayMillis numbers its UTC day.
const dayMillis = 24 * 60 * 60 * 1000

// usageKeys are the usage table's column for each group, and how its name
// is found: the only text that goes into the queries, never the caller's.
var usageKeys = map[corral.UsageGroup]struct{ column, name string }{
	corral.UsageByAgent: {"agent_id", `(SELECT name FROM agents WHERE id = k)`},
	corral.UsageByUser:  {"user_id", `(SELECT name FROM users WHERE id = k)`},
	corral.UsageByModel: {"model", `''`},
}

// Usage sums the usage table per group over q's span, and per group and
// UTC day. Both sums are read in one snapshot, so a group's total is
// always the sum of its days (but for runs, which are counted once however
// many days they span).
func (db *DB) Usage(ctx context.Context, q corral.UsageQuery) ([]corral.UsageTotal, error) {
	const op = "sqlite.Usage"
	key, ok := usageKeys[q.GroupBy]
	if !ok {
		return nil, corral.Errorf(corral.EINVALID, "usage cannot be grouped by %q", q.GroupBy)
	}
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		since = millis(q.Since)
	}
	if !q.Until.IsZero() {
		until = millis(q.Until)
	}
	// Everyone's, or (with the index on owner_id, at) one owner's.
	where := ` FROM usage WHERE ?1 = '' AND at >= ?2 AND at < ?3 `
	if q.Owner != "" {
		where = ` FROM usage WHERE owner_id = ?1 AND at >= ?2 AND at < ?3 `
	}
	const sums = `SUM(input) AS i, SUM(output) AS o, COUNT(*) AS c, COUNT(DISTINCT NULLIF(run_id, '')) AS r`
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rollback(tx)
	rows, err := tx.QueryContext(ctx, `
		SELECT k, `+key.name+`, i, o, c, r
		FROM (SELECT `+key.column+` AS k, `+sums+where+`GROUP BY k)
		ORDER BY i + o DESC, k`, q.Owner, since, until)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	totals, err := collect(rows, func(s scanner) (corral.UsageTotal, error) {
		var t corral.UsageTotal
		var name sql.NullString
		err := s.Scan(&t.Key, &name, &t.Tokens.Input, &t.Tokens.Output, &t.Calls, &t.Runs)
		t.Name = name.String
		return t, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	index := make(map[string]int, len(totals))
	for i, t := range totals {
		index[t.Key] = i
	}
	rows, err = tx.QueryContext(ctx, `
		SELECT `+key.column+` AS k, at / `+strconv.Itoa(dayMillis)+` AS day, `+sums+where+`
		GROUP BY k, day ORDER BY k, day`, q.Owner, since, until)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var day int64
		var d corral.UsageDay
		if err := rows.Scan(&k, &day, &d.Tokens.Input, &d.Tokens.Output, &d.Calls, &d.Runs); err != nil {
			return nil, corral.Internal(op, err)
		}
		d.Day = time.UnixMilli(day * dayMillis).UTC()
		i, ok := index[k]
		if !ok {
			return nil, corral.Internal(op, errUsageSnapshot)
		}
		totals[i].Days = append(totals[i].Days, d)
	}
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	return totals, nil
}

// errUsageSnapshot is a day whose group has no total: the two sums did not
// read the same rows, which one read transaction rules out.
var errUsageSnapshot = errors.New("a day of usage has no total: the sums read different snapshots")

// AgentBudgets lists every agent's budget with its owner and how many of
// its reservations are open, by agent name.
func (db *DB) AgentBudgets(ctx context.Context) ([]corral.AgentBudget, error) {
	const op = "sqlite.AgentBudgets"
	rows, err := db.query(ctx, `
		SELECT a.id, a.name, u.id, u.name, a.budget_tokens, a.budget_used, a.budget_reserved,
			(SELECT COUNT(*) FROM reservations r WHERE r.agent_id = a.id)
		FROM agents a JOIN users u ON u.id = a.owner_id
		ORDER BY a.name, a.id`)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	out, err := collect(rows, func(s scanner) (corral.AgentBudget, error) {
		var b corral.AgentBudget
		err := s.Scan(&b.AgentID, &b.AgentName, &b.Owner.ID, &b.Owner.Name,
			&b.Budget.Tokens, &b.Budget.Used, &b.Budget.Reserved, &b.Open)
		return b, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return out, nil
}
