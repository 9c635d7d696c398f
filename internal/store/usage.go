package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
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

// usageKeys are the usage table's column for each group, and where its
// name is found: the only text that goes into the queries, never the
// caller's.
var usageKeys = map[corral.UsageGroup]struct{ column, names string }{
	corral.UsageByAgent: {"agent_id", "agents"},
	corral.UsageByUser:  {"user_id", "users"},
	corral.UsageByModel: {"model", ""},
}

// Usage sums the usage table per group over q's span, and per group and
// UTC day, from one pass over the calls in the span (grouped by group,
// day and run, which is what counting distinct runs needs), in one
// snapshot: a group's total is always the sum of its days, but for runs,
// which are counted once however many days they span.
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
	where := `?1 = ''`
	if q.Owner != "" {
		where = `owner_id = ?1`
	}
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rollback(tx)
	rows, err := tx.QueryContext(ctx, `
		SELECT `+key.column+` AS k, at / `+strconv.Itoa(dayMillis)+` AS day, run_id, SUM(input), SUM(output), COUNT(*)
		FROM usage WHERE `+where+` AND at >= ?2 AND at < ?3
		GROUP BY k, day, run_id ORDER BY k, day`, q.Owner, since, until)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	var totals []corral.UsageTotal
	var runs map[string]bool // the current group's
	for rows.Next() {
		var k, run string
		var day int64
		var c corral.UsageCount
		if err := rows.Scan(&k, &day, &run, &c.Tokens.Input, &c.Tokens.Output, &c.Calls); err != nil {
			rows.Close()
			return nil, corral.Internal(op, err)
		}
		if run != "" {
			c.Runs = 1
		}
		if len(totals) == 0 || totals[len(totals)-1].Key != k {
			totals = append(totals, corral.UsageTotal{Key: k})
			runs = map[string]bool{}
		}
		t := &totals[len(totals)-1]
		at := time.UnixMilli(day * dayMillis).UTC()
		if n := len(t.Days); n == 0 || !t.Days[n-1].Day.Equal(at) {
			t.Days = append(t.Days, corral.UsageDay{Day: at})
		}
		add(&t.Days[len(t.Days)-1].UsageCount, c)
		c.Runs = 0
		if run != "" && !runs[run] {
			runs[run], c.Runs = true, 1
		}
		add(&t.UsageCount, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	if key.names != "" {
		for i := range totals {
			var name string
			err := tx.QueryRowContext(ctx, `SELECT name FROM `+key.names+` WHERE id = ?`, totals[i].Key).Scan(&name)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, corral.Internal(op, err)
			}
			totals[i].Name = name // "" for one that is gone
		}
	}
	slices.SortStableFunc(totals, func(a, b corral.UsageTotal) int {
		return cmp.Or(cmp.Compare(b.Tokens.Input+b.Tokens.Output, a.Tokens.Input+a.Tokens.Output), cmp.Compare(a.Key, b.Key))
	})
	return totals, nil
}

func add(sum *corral.UsageCount, c corral.UsageCount) {
	sum.Tokens.Input += c.Tokens.Input
	sum.Tokens.Output += c.Tokens.Output
	sum.Calls += c.Calls
	sum.Runs += c.Runs
}

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
