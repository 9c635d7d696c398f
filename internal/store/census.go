package store

import (
	"context"
	"io/fs"
	"strconv"
	"strings"

	"corral"
)

// Census is how many of each thing a database holds: what a backup and a
// restore say they hold. Counts and agents' ids only: nothing in it is
// secret.
type Census struct {
	Users             int64
	Agents            int64
	Runs              int64
	RunsInProgress    int64 // admitted, running or paused: a restored server reconciles or resumes them
	ChangeSets        int64
	PendingChangeSets int64
	Messages          int64
	TraceEvents       int64
	// Sealed counts the code-host credentials and agents' secrets: what
	// cannot be opened without the secret key.
	Sealed   int64
	AgentIDs []string // every agent, by id
}

// Census counts what the database holds.
func (db *DB) Census(ctx context.Context) (Census, error) {
	const op = "sqlite.Census"
	var c Census
	err := db.queryRow(ctx, `SELECT
		(SELECT count(*) FROM users),
		(SELECT count(*) FROM agents),
		(SELECT count(*) FROM runs),
		(SELECT count(*) FROM runs WHERE status IN ('admitted', 'running', 'paused')),
		(SELECT count(*) FROM change_sets),
		(SELECT count(*) FROM change_sets WHERE status = 'pending'),
		(SELECT count(*) FROM messages),
		(SELECT count(*) FROM trace_events),
		(SELECT count(*) FROM credentials) + (SELECT count(*) FROM agent_secrets)`).
		Scan(&c.Users, &c.Agents, &c.Runs, &c.RunsInProgress, &c.ChangeSets, &c.PendingChangeSets,
			&c.Messages, &c.TraceEvents, &c.Sealed)
	if err != nil {
		return Census{}, corral.Internal(op, err)
	}
	rows, err := db.query(ctx, `SELECT id FROM agents ORDER BY id`)
	if err != nil {
		return Census{}, corral.Internal(op, err)
	}
	c.AgentIDs, err = collect(rows, func(s scanner) (string, error) {
		var id string
		return id, s.Scan(&id)
	})
	if err != nil {
		return Census{}, corral.Internal(op, err)
	}
	return c, nil
}

// SchemaVersion is the schema version of this release: the one Open
// migrates a database to and OpenExisting requires.
func SchemaVersion() int64 {
	var v int64
	names, _ := fs.Glob(migrations, "migrations/sqlite/*.sql")
	for _, n := range names {
		num, _, _ := strings.Cut(strings.TrimPrefix(n, "migrations/sqlite/"), "_")
		if x, err := strconv.ParseInt(num, 10, 64); err == nil && x > v {
			v = x
		}
	}
	for _, m := range goMigrations {
		v = max(v, m.Version)
	}
	return v
}
