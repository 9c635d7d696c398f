package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"corral"
)

// agentColumns selects an agent, its owner's name and the number of its
// change sets waiting for a person from agents a joined with users o.
// scanAgent reads them in this order, then the access rank and whether
// the user accepted the agent as a delegation target. The count is a
// lookup in the partial index change_sets_pending_disk.
const agentColumns = `a.id, a.name, a.instructions, a.model, a.owner_id, o.name,
	a.fs, a.changes, a.network, a.library,
	a.max_prompt_bytes, a.max_runs, a.run_timeout_s, a.cpu_millis, a.memory_bytes, a.pids, a.output_bytes,
	a.disk_bytes, a.disk_inodes, a.pending_disk_bytes,
	a.budget_tokens, a.budget_used, a.budget_reserved, a.state, a.created_at, a.updated_at, a.globs, a.driver, a.created_by_run,
	(SELECT count(*) FROM change_sets p WHERE p.agent_id = a.id AND p.status = 'pending')`

// rank returns SQL that turns the level name in col into its corral.Level
// number, so that SQL's max picks the highest level; 0 (LevelNone) for
// anything else.
func rank(col string) string {
	return fmt.Sprintf(`CASE %s WHEN '%s' THEN %d WHEN '%s' THEN %d WHEN '%s' THEN %d ELSE %d END`, col,
		corral.LevelViewer, int(corral.LevelViewer),
		corral.LevelRunner, int(corral.LevelRunner),
		corral.LevelEditor, int(corral.LevelEditor),
		int(corral.LevelNone))
}

// ownerRank is the rank of the agent's owner.
var ownerRank = fmt.Sprint(int(corral.LevelOwner))

// agentQuery loads one agent (?1) with the access of one user (?2): owner,
// or else the higher of the user's grant and the links the user joined;
// and whether the user accepted it as a delegation target: owner, an
// accepted grant, or a joined link (joining one is accepting it).
var agentQuery = `
	SELECT ` + agentColumns + `,
		CASE WHEN a.owner_id = ?2 THEN ` + ownerRank + ` ELSE coalesce((SELECT max(r) FROM (
			SELECT ` + rank("g.level") + ` AS r FROM grants g
				WHERE g.agent_id = a.id AND g.user_id = ?2
			UNION ALL
			SELECT ` + rank("l.level") + ` AS r FROM link_members m
				JOIN links l ON l.id = m.link_id
				WHERE l.agent_id = a.id AND m.user_id = ?2) AS paths), 0)
		END,
		CASE WHEN a.owner_id = ?2
			OR EXISTS (SELECT 1 FROM grants g
				WHERE g.agent_id = a.id AND g.user_id = ?2 AND g.accepted = 1)
			OR EXISTS (SELECT 1 FROM link_members m
				JOIN links l ON l.id = m.link_id
				WHERE l.agent_id = a.id AND m.user_id = ?2)
		THEN 1 ELSE 0 END
	FROM agents a JOIN users o ON o.id = a.owner_id
	WHERE a.id = ?1`

// agentsForQuery lists the agents one user (?1) can reach, one row per
// path: owned, granted, or through a joined link, each with whether that
// path is consent to the agent as a delegation target (an owner's and a
// joined link's are; a grant's once accepted). Each branch is an index
// lookup joined to the agent and its owner; AgentsFor keeps the highest
// level of an agent reached twice, and any path's consent, and sorts. A CTE grouping the paths and
// sorting in SQL reads the same rows, but through two temporary b-trees
// that cost SQLite more than the whole rest of the query for a user's few
// dozen agents.
var agentsForQuery = `
	SELECT ` + agentColumns + `, ` + ownerRank + `, 1
	FROM agents a JOIN users o ON o.id = a.owner_id
	WHERE a.owner_id = ?1
	UNION ALL
	SELECT ` + agentColumns + `, ` + rank("g.level") + `, g.accepted
	FROM grants g JOIN agents a ON a.id = g.agent_id JOIN users o ON o.id = a.owner_id
	WHERE g.user_id = ?1 AND a.owner_id <> ?1
	UNION ALL
	SELECT ` + agentColumns + `, ` + rank("l.level") + `, 1
	FROM link_members m JOIN links l ON l.id = m.link_id
		JOIN agents a ON a.id = l.agent_id JOIN users o ON o.id = a.owner_id
	WHERE m.user_id = ?1 AND a.owner_id <> ?1`

// agentGlobs is how an agent's policy lists are stored: one JSON column,
// its path globs and its egress allow-list.
type agentGlobs struct {
	Secrets   []string     `json:"secrets,omitempty"`
	Protected []string     `json:"protected,omitempty"`
	Risky     []string     `json:"risky,omitempty"`
	Egress    *agentEgress `json:"egress,omitempty"`
}

type agentEgress struct {
	Allow   []egressRule `json:"allow,omitempty"`
	Presets []string     `json:"presets,omitempty"`
}

type egressRule struct {
	Host    string   `json:"host"`
	Ports   []int    `json:"ports,omitempty"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// driverOf is an agent's driver as stored: the domain's "" is the
// built-in loop, stored by its name.
func driverOf(a corral.Agent) string {
	if a.Driver == "" {
		return corral.DriverBuiltin
	}
	return a.Driver
}

func globsOf(p corral.Policy) string {
	g := agentGlobs{Secrets: p.Secrets, Protected: p.Protected, Risky: p.Risky}
	if len(p.Egress.Allow) > 0 || len(p.Egress.Presets) > 0 {
		g.Egress = &agentEgress{Presets: p.Egress.Presets}
		for _, r := range p.Egress.Allow {
			g.Egress.Allow = append(g.Egress.Allow, egressRule(r))
		}
	}
	b, _ := json.Marshal(g) // cannot fail
	return string(b)
}

func scanAgent(s scanner) (corral.Agent, error) {
	var a corral.Agent
	var created, updated int64
	var access int
	var globs string
	err := s.Scan(&a.ID, &a.Name, &a.Instructions, &a.Model, &a.Owner.ID, &a.Owner.Name,
		&a.Policy.FS, &a.Policy.Changes, &a.Policy.Network, &a.Policy.Library,
		&a.Limits.MaxPromptBytes, &a.Limits.MaxRuns, &a.Limits.RunTimeoutS, &a.Limits.CPUMillis,
		&a.Limits.MemoryBytes, &a.Limits.Pids, &a.Limits.OutputBytes,
		&a.Limits.DiskBytes, &a.Limits.DiskInodes, &a.Limits.PendingDiskBytes,
		&a.Budget.Tokens, &a.Budget.Used, &a.Budget.Reserved, &a.State, &created, &updated, &globs, &a.Driver, &a.CreatedByRun,
		&a.PendingChanges, &access, &a.Accepted)
	if err != nil {
		return corral.Agent{}, err
	}
	// Most agents set no globs: "{}" needs no JSON decoder.
	if globs != "{}" {
		var g agentGlobs
		if err := json.Unmarshal([]byte(globs), &g); err != nil {
			return corral.Agent{}, fmt.Errorf("agent %s: globs: %w", a.ID, err)
		}
		a.Policy.Secrets, a.Policy.Protected, a.Policy.Risky = g.Secrets, g.Protected, g.Risky
		if g.Egress != nil {
			a.Policy.Egress.Presets = g.Egress.Presets
			for _, r := range g.Egress.Allow {
				a.Policy.Egress.Allow = append(a.Policy.Egress.Allow, corral.EgressRule(r))
			}
		}
	}
	if access < int(corral.LevelNone) || access > int(corral.LevelOwner) {
		return corral.Agent{}, fmt.Errorf("agent %s: access rank %d out of range", a.ID, access)
	}
	if a.Driver == corral.DriverBuiltin {
		a.Driver = "" // the domain's name for the built-in loop (see driverOf)
	}
	a.Access = corral.Level(access)
	a.CreatedAt = fromMillis(created)
	a.UpdatedAt = fromMillis(updated)
	return a, nil
}

// CreateAgent stores a new agent owned by a.Owner.ID. Access is ignored.
func (db *DB) CreateAgent(ctx context.Context, a corral.Agent) error {
	return db.write(ctx, "sqlite.CreateAgent", func(tx *txn) error {
		return insertAgent(ctx, tx, db.orNow(a.CreatedAt), a)
	})
}

// insertAgent stores a, created at created, through x (the writer or
// one of its transactions).
func insertAgent(ctx context.Context, x interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, created time.Time, a corral.Agent) error {
	const op = "sqlite.CreateAgent"
	if err := needID(op, a.ID); err != nil {
		return err
	}
	updated := a.UpdatedAt
	if updated.IsZero() {
		updated = created
	}
	_, err := x.ExecContext(ctx, `
		INSERT INTO agents (id, owner_id, name, instructions, model, fs, changes, network, library,
			max_prompt_bytes, max_runs, run_timeout_s, cpu_millis, memory_bytes, pids, output_bytes,
			disk_bytes, disk_inodes, pending_disk_bytes,
			budget_tokens, budget_used, state, created_at, updated_at, globs, driver, created_by_run)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Owner.ID, a.Name, a.Instructions, a.Model,
		a.Policy.FS, a.Policy.Changes, a.Policy.Network, a.Policy.Library,
		a.Limits.MaxPromptBytes, a.Limits.MaxRuns, a.Limits.RunTimeoutS, a.Limits.CPUMillis,
		a.Limits.MemoryBytes, a.Limits.Pids, a.Limits.OutputBytes,
		a.Limits.DiskBytes, a.Limits.DiskInodes, a.Limits.PendingDiskBytes,
		a.Budget.Tokens, a.Budget.Used, a.State, millis(created), millis(updated), globsOf(a.Policy), driverOf(a), a.CreatedByRun)
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err):
		return conflict("agent already exists")
	default:
		return corral.Internal(op, err)
	}
}

// Agent returns an agent with userID's access to it, LevelNone included.
func (db *DB) Agent(ctx context.Context, id, userID string) (corral.Agent, error) {
	a, err := scanAgent(db.queryRow(ctx, agentQuery, id, userID))
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, sql.ErrNoRows):
		return corral.Agent{}, corral.NotFound("agent")
	default:
		return corral.Agent{}, corral.Internal("sqlite.Agent", err)
	}
}

// AgentsFor lists the agents userID owns, was granted, or joined a link
// of, newest first, each once with userID's highest access.
func (db *DB) AgentsFor(ctx context.Context, userID string) ([]corral.Agent, error) {
	const op = "sqlite.AgentsFor"
	rows, err := db.query(ctx, agentsForQuery, userID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	paths, err := collect(rows, scanAgent)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	// One agent reached by several paths (a grant and a link, two links)
	// is listed once, at the highest of their levels.
	agents := paths[:0]
	at := make(map[string]int, len(paths))
	for _, a := range paths {
		if i, ok := at[a.ID]; ok {
			agents[i].Access = max(agents[i].Access, a.Access)
			agents[i].Accepted = agents[i].Accepted || a.Accepted
			continue
		}
		at[a.ID] = len(agents)
		agents = append(agents, a)
	}
	slices.SortFunc(agents, func(a, b corral.Agent) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return agents, nil
}

// UpdateAgent writes every settable field of a: everything but the owner,
// the creation time, the tokens used and the state. Only metering changes
// the tokens used and only SetAgentState the state, so that a
// read-modify-write of settings never undoes usage counted, nor a pause or
// quarantine made, meanwhile. UpdatedAt is a.UpdatedAt, or now when zero.
func (db *DB) UpdateAgent(ctx context.Context, a corral.Agent) error {
	const op = "sqlite.UpdateAgent"
	res, err := db.exec(ctx, `
		UPDATE agents SET name = ?, instructions = ?, model = ?,
			fs = ?, changes = ?, network = ?, library = ?,
			max_prompt_bytes = ?, max_runs = ?, run_timeout_s = ?, cpu_millis = ?,
			memory_bytes = ?, pids = ?, output_bytes = ?,
			disk_bytes = ?, disk_inodes = ?, pending_disk_bytes = ?,
			budget_tokens = ?, updated_at = ?, globs = ?, driver = ?
		WHERE id = ?`,
		a.Name, a.Instructions, a.Model,
		a.Policy.FS, a.Policy.Changes, a.Policy.Network, a.Policy.Library,
		a.Limits.MaxPromptBytes, a.Limits.MaxRuns, a.Limits.RunTimeoutS, a.Limits.CPUMillis,
		a.Limits.MemoryBytes, a.Limits.Pids, a.Limits.OutputBytes,
		a.Limits.DiskBytes, a.Limits.DiskInodes, a.Limits.PendingDiskBytes,
		a.Budget.Tokens, millis(db.orNow(a.UpdatedAt)), globsOf(a.Policy), driverOf(a),
		a.ID)
	if err != nil {
		return corral.Internal(op, err)
	}
	return rowsAffected(op, "agent", res)
}

// DeleteAgent deletes an agent; its grants, links, link members,
// messages, runs and change sets go with it (traces stay: they are
// append-only). ECONFLICT while a run of the agent is active: the check and
// the delete are one statement, so no run can be admitted in between.
func (db *DB) DeleteAgent(ctx context.Context, id string) error {
	const op = "sqlite.DeleteAgent"
	res, err := db.exec(ctx, `
		DELETE FROM agents WHERE id = ?1 AND NOT EXISTS (
			SELECT 1 FROM runs WHERE agent_id = ?1 AND status IN ('admitted', 'running', 'paused'))`, id)
	if err != nil {
		return corral.Internal(op, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		var exists bool
		if err := db.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?)`, id).Scan(&exists); err != nil {
			return corral.Internal(op, err)
		}
		if exists {
			return conflict("a run of this agent is still active: stop or kill it first")
		}
	}
	return rowsAffected(op, "agent", res)
}

// PutGrant creates or changes userID's level on an agent, as by. Only the
// levels a grant can hold are accepted: viewer, runner, editor. A new
// grant is not accepted as a delegation target; a changed one keeps its
// answer.
func (db *DB) PutGrant(ctx context.Context, agentID, userID string, level corral.Level, now time.Time, by string) error {
	const op = "sqlite.PutGrant"
	if level < corral.LevelViewer || level > corral.LevelEditor {
		return corral.Errorf(corral.EINVALID, "a grant's level must be viewer, runner or editor")
	}
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO grants (agent_id, user_id, level, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (agent_id, user_id) DO UPDATE SET level = excluded.level`,
			agentID, userID, level.String(), millis(now)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, now, corral.AccountEvent{Type: corral.GrantPut, Actor: by, User: userID,
			Agent: agentID, Detail: level.String()})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return db.missing(ctx, op, "agents", "agent", agentID, "user")
	default:
		return corral.Internal(op, err)
	}
}

// missing tells, after a foreign key failure involving two references,
// which one was missing: kind when table has no row with id, else other.
func (db *DB) missing(ctx context.Context, op, table, kind, id, other string) error {
	var exists bool
	err := db.queryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = ?)`, id).Scan(&exists)
	switch {
	case err != nil:
		return corral.Internal(op, err)
	case !exists:
		return corral.NotFound(kind)
	default:
		return corral.NotFound(other)
	}
}

// DeleteGrant removes userID's grant on an agent, as by.
func (db *DB) DeleteGrant(ctx context.Context, agentID, userID, by string) error {
	const op = "sqlite.DeleteGrant"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM grants WHERE agent_id = ? AND user_id = ?`, agentID, userID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "grant", res); err != nil {
			return err
		}
		return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.GrantDeleted, Actor: by, User: userID, Agent: agentID})
	})
}

// recorded records ev, now, in tx.
func (db *DB) recorded(ctx context.Context, tx *txn, op string, ev corral.AccountEvent) error {
	if err := recordAccount(ctx, tx, db.now(), ev); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// AcceptGrant records that userID accepted their grant on an agent as a
// delegation target. Accepting again changes nothing.
func (db *DB) AcceptGrant(ctx context.Context, agentID, userID string) error {
	const op = "sqlite.AcceptGrant"
	return db.write(ctx, op, func(tx *txn) error {
		// Only a change is an event: accepting again is not.
		res, err := tx.ExecContext(ctx,
			`UPDATE grants SET accepted = 1 WHERE agent_id = ? AND user_id = ? AND accepted = 0`, agentID, userID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return corral.Internal(op, err)
		} else if n == 1 {
			return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.GrantAccepted, Actor: userID, Agent: agentID})
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM grants WHERE agent_id = ? AND user_id = ?)`,
			agentID, userID).Scan(&exists); err != nil {
			return corral.Internal(op, err)
		}
		if !exists {
			return corral.NotFound("grant")
		}
		return nil
	})
}

// Grants lists an agent's grants, oldest first. Each User has ID, Email and
// Name; an unknown agent has none. A grant is accepted when its user
// accepted it or joined a link of the agent, as agentQuery decides.
func (db *DB) Grants(ctx context.Context, agentID string) ([]corral.Grant, error) {
	const op = "sqlite.Grants"
	rows, err := db.query(ctx, `
		SELECT g.agent_id, u.id, u.email, u.name, g.level, g.created_at,
			CASE WHEN g.accepted = 1 OR EXISTS (SELECT 1 FROM link_members m
				JOIN links l ON l.id = m.link_id
				WHERE l.agent_id = g.agent_id AND m.user_id = g.user_id) THEN 1 ELSE 0 END
		FROM grants g JOIN users u ON u.id = g.user_id
		WHERE g.agent_id = ?
		ORDER BY g.created_at, u.id`, agentID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	defer rows.Close()
	var grants []corral.Grant
	for rows.Next() {
		var g corral.Grant
		var level string
		var created int64
		if err := rows.Scan(&g.AgentID, &g.User.ID, &g.User.Email, &g.User.Name, &level, &created, &g.Accepted); err != nil {
			return nil, corral.Internal(op, err)
		}
		if g.Level, err = corral.ParseLevel(level); err != nil {
			return nil, corral.Internal(op, fmt.Errorf("grant level %q: %w", level, err))
		}
		g.CreatedAt = fromMillis(created)
		grants = append(grants, g)
	}
	if err := rows.Err(); err != nil {
		return nil, corral.Internal(op, err)
	}
	return grants, nil
}

// CreateLink stores a share link by the hash of its token. Only viewer and
// runner links exist.
func (db *DB) CreateLink(ctx context.Context, l corral.Link, hash []byte) error {
	const op = "sqlite.CreateLink"
	if err := needID(op, l.ID); err != nil {
		return err
	}
	if l.Level != corral.LevelViewer && l.Level != corral.LevelRunner {
		return corral.Errorf(corral.EINVALID, "a link's level must be viewer or runner")
	}
	at := db.orNow(l.CreatedAt)
	err := db.write(ctx, op, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO links (id, agent_id, level, token_hash, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			l.ID, l.AgentID, l.Level.String(), hash, l.CreatedBy, millis(at)); err != nil {
			return err
		}
		return recordAccount(ctx, tx, at, corral.AccountEvent{Type: corral.LinkCreated, Actor: l.CreatedBy, Agent: l.AgentID,
			Object: l.ID, Detail: l.Level.String()})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return db.missing(ctx, op, "agents", "agent", l.AgentID, "user")
	case isUnique(err):
		return conflict("link already exists")
	default:
		return corral.Internal(op, err)
	}
}

// DeleteLink deletes a link of the agent, as by; the cascade to
// link_members takes the access of everyone who joined through it.
func (db *DB) DeleteLink(ctx context.Context, agentID, linkID, by string) error {
	const op = "sqlite.DeleteLink"
	return db.write(ctx, op, func(tx *txn) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM links WHERE id = ? AND agent_id = ?`, linkID, agentID)
		if err != nil {
			return corral.Internal(op, err)
		}
		if err := rowsAffected(op, "link", res); err != nil {
			return err
		}
		return db.recorded(ctx, tx, op, corral.AccountEvent{Type: corral.LinkDeleted, Actor: by, Agent: agentID, Object: linkID})
	})
}

// linkColumns selects a link, never its token hash; scanLink reads them.
const linkColumns = `id, agent_id, level, created_by, created_at`

func scanLink(s scanner) (corral.Link, error) {
	var l corral.Link
	var level string
	var created int64
	if err := s.Scan(&l.ID, &l.AgentID, &level, &l.CreatedBy, &created); err != nil {
		return corral.Link{}, err
	}
	var err error
	if l.Level, err = corral.ParseLevel(level); err != nil {
		return corral.Link{}, fmt.Errorf("link %s: level %q: %w", l.ID, level, err)
	}
	l.CreatedAt = fromMillis(created)
	return l, nil
}

// LinkByHash returns the link whose token has this hash.
func (db *DB) LinkByHash(ctx context.Context, hash []byte) (corral.Link, error) {
	l, err := scanLink(db.queryRow(ctx,
		`SELECT `+linkColumns+` FROM links WHERE token_hash = ?`, hash))
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, sql.ErrNoRows):
		return corral.Link{}, corral.NotFound("link")
	default:
		return corral.Link{}, corral.Internal("sqlite.LinkByHash", err)
	}
}

// Links lists an agent's share links, oldest first; an unknown agent has
// none.
func (db *DB) Links(ctx context.Context, agentID string) ([]corral.Link, error) {
	const op = "sqlite.Links"
	rows, err := db.query(ctx, `
		SELECT `+linkColumns+` FROM links
		WHERE agent_id = ? ORDER BY created_at, id`, agentID)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	links, err := collect(rows, scanLink)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return links, nil
}

// JoinLink records that userID accepted a link. Joining again changes
// nothing, not even the time of joining.
func (db *DB) JoinLink(ctx context.Context, linkID, userID string, now time.Time) error {
	const op = "sqlite.JoinLink"
	err := db.write(ctx, op, func(tx *txn) error {
		// ON CONFLICT DO NOTHING rather than INSERT OR IGNORE: it ignores
		// only the second join, not a NOT NULL or CHECK failure. Only the
		// first join is an event.
		res, err := tx.ExecContext(ctx, `
			INSERT INTO link_members (link_id, user_id, joined_at) VALUES (?, ?, ?)
			ON CONFLICT (link_id, user_id) DO NOTHING`,
			linkID, userID, millis(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		var agentID string
		if err := tx.QueryRowContext(ctx, `SELECT agent_id FROM links WHERE id = ?`, linkID).Scan(&agentID); err != nil {
			return err
		}
		return recordAccount(ctx, tx, now, corral.AccountEvent{Type: corral.LinkJoined, Actor: userID, Agent: agentID, Object: linkID})
	})
	switch {
	case err == nil:
		return nil
	case isForeignKey(err):
		return db.missing(ctx, op, "links", "link", linkID, "user")
	default:
		return corral.Internal(op, err)
	}
}
