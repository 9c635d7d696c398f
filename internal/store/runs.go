package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"corral"
)

var _ corral.RunStore = (*DB)(nil)

// Page sizes of Runs and Admissions.
const (
	defaultRuns = 100
	maxRuns     = 1000
)

// pageSize turns a caller's limit into the one a list uses: <= 0 means
// the default, and no caller gets more than maxRuns.
func pageSize(limit int) int {
	if limit <= 0 {
		return defaultRuns
	}
	return min(limit, maxRuns)
}

// placeholders returns "?, ?, ?" for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// appendStrings returns first followed by ss, as query arguments.
func appendStrings[S ~string](first []any, ss []S) []any {
	out := append([]any(nil), first...)
	for _, s := range ss {
		out = append(out, string(s))
	}
	return out
}

// activeStatuses is the SQL list of the statuses corral.RunActive accepts.
const activeStatuses = `'` + string(corral.RunAdmitted) + `', '` + string(corral.RunRunning) + `', '` + string(corral.RunPaused) + `'`

// admitCountsQuery counts an agent's runs: all of them, and the active.
const admitCountsQuery = `SELECT count(*), coalesce(sum(CASE WHEN status IN (` + activeStatuses + `) THEN 1 ELSE 0 END), 0)
	FROM runs WHERE agent_id = ?`

// treeCountsQuery counts, for a delegated run being admitted, the runs its
// parent (?1) started and the delegated runs of its tree (?2) active now.
const treeCountsQuery = `SELECT
	(SELECT count(*) FROM runs WHERE parent_run_id = ?1),
	(SELECT count(*) FROM runs WHERE root_run_id = ?2 AND depth > 0 AND status IN (` + activeStatuses + `))`

// pendingDiskQuery sums what pending change sets hold on disk: those of
// the agent (?1), of every agent of its owner (?2), and of every agent.
// Each sum reads the partial index change_sets_pending_disk alone; the
// planner, which has no statistics, would rather take change_sets_pending
// and the table rows, so CROSS JOIN fixes the owner's order (their agents
// first, by agents_owner_id) and INDEXED BY the server's index.
const pendingDiskQuery = `SELECT
	(SELECT coalesce(sum(disk_bytes), 0) FROM change_sets
		WHERE agent_id = ?1 AND status = '` + string(corral.ChangePending) + `'),
	(SELECT coalesce(sum(c.disk_bytes), 0) FROM agents a CROSS JOIN change_sets c ON c.agent_id = a.id
		WHERE a.owner_id = ?2 AND c.status = '` + string(corral.ChangePending) + `'),
	(SELECT coalesce(sum(disk_bytes), 0) FROM change_sets INDEXED BY change_sets_pending_disk
		WHERE status = '` + string(corral.ChangePending) + `')`

// Admit decides and records in one write transaction. The writer pool
// begins every transaction IMMEDIATE, so the facts are read under the
// write lock: no other Admit, in this process or another, can start a run
// between the count and the insert. decide runs while the lock is held and
// must therefore be quick and do no I/O.
//
// The evidence's RunsAdmitted, ActiveRuns, the three *PendingDiskBytes,
// TokensUsed, TokensBudget, AgentState, Reason and RunID are the store's,
// whatever ev held; At is ev.At, or now when zero. m and r must belong to
// ev.AgentID. An admitted run is stored as RunAdmitted with no tokens,
// times, violation, reason or change set: those only come from UpdateRun
// and Settle. ENOTFOUND "agent" when the agent does not exist, "user" when
// ev.UserID, m.Author or r.TriggeredBy names no account.
func (db *DB) Admit(ctx context.Context, m corral.Message, r corral.Run, ev corral.Admission, decide func(corral.AdmissionFacts) string) (corral.Admission, error) {
	const op = "sqlite.Admit"
	if err := needID(op, ev.ID); err != nil {
		return corral.Admission{}, err
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Admission{}, corral.Internal(op, err)
	}
	defer rollback(tx)

	// Access is irrelevant here: the caller has already decided who may
	// send; an empty user id gives LevelNone.
	a, err := scanAgent(tx.QueryRowContext(ctx, agentQuery, ev.AgentID, ""))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.Admission{}, corral.NotFound("agent")
	case err != nil:
		return corral.Admission{}, corral.Internal(op, err)
	}
	facts := corral.AdmissionFacts{Agent: a}
	if err := tx.QueryRowContext(ctx, admitCountsQuery, a.ID).Scan(&facts.RunsAdmitted, &facts.ActiveRuns); err != nil {
		return corral.Admission{}, corral.Internal(op, err)
	}
	if err := tx.QueryRowContext(ctx, pendingDiskQuery, a.ID, a.Owner.ID).Scan(
		&facts.PendingDiskBytes, &facts.OwnerPendingDiskBytes, &facts.ServerPendingDiskBytes); err != nil {
		return corral.Admission{}, corral.Internal(op, err)
	}
	if r.ParentRunID != "" {
		if err := tx.QueryRowContext(ctx, treeCountsQuery, r.ParentRunID, r.RootRunID).Scan(&facts.Children, &facts.TreeActive); err != nil {
			return corral.Admission{}, corral.Internal(op, err)
		}
	}

	ev.Reason = decide(facts)
	ev.RunsAdmitted, ev.ActiveRuns = facts.RunsAdmitted, facts.ActiveRuns
	ev.PendingDiskBytes = facts.PendingDiskBytes
	ev.OwnerPendingDiskBytes, ev.ServerPendingDiskBytes = facts.OwnerPendingDiskBytes, facts.ServerPendingDiskBytes
	ev.TokensUsed, ev.TokensBudget = a.Budget.Used, a.Budget.Tokens
	ev.AgentState = a.State
	ev.At = fromMillis(millis(db.orNow(ev.At))) // as stored
	ev.RunID = ""
	if ev.Reason == "" {
		if err := db.admitRun(ctx, tx, m, r, ev.AgentID); err != nil {
			return corral.Admission{}, err
		}
		ev.RunID = r.ID
	}

	var user sql.NullString
	if ev.UserID != "" {
		user = sql.NullString{String: ev.UserID, Valid: true}
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO admissions (id, agent_id, user_id, run_id, reason, prompt_bytes,
			runs_admitted, active_runs, tokens_used, tokens_budget, agent_state, at, pending_disk_bytes,
			owner_pending_disk_bytes, server_pending_disk_bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.ID, ev.AgentID, user, ev.RunID, ev.Reason, ev.PromptBytes,
		ev.RunsAdmitted, ev.ActiveRuns, ev.TokensUsed, ev.TokensBudget, ev.AgentState, millis(ev.At), ev.PendingDiskBytes,
		ev.OwnerPendingDiskBytes, ev.ServerPendingDiskBytes)
	switch {
	case isForeignKey(err):
		return corral.Admission{}, corral.NotFound("user") // the agent was read in this transaction
	case isUnique(err):
		return corral.Admission{}, conflict("admission already exists")
	case err != nil:
		return corral.Admission{}, corral.Internal(op, err)
	}
	if err := tx.Commit(); err != nil {
		return corral.Admission{}, corral.Internal(op, err)
	}
	return ev, nil
}

// admitRun stores the message and the run of an admission inside its
// transaction.
func (db *DB) admitRun(ctx context.Context, tx *txn, m corral.Message, r corral.Run, agentID string) error {
	const op = "sqlite.Admit"
	terminal := r.Driver == corral.DriverTerminal
	if err := needID(op, r.ID); err != nil {
		return err
	}
	if !terminal {
		if err := needID(op, m.ID); err != nil {
			return err
		}
	}
	// A message or run of another agent would be admitted on facts that
	// are not its own: a bug in the caller, not a user's mistake.
	if (!terminal && m.AgentID != agentID) || r.AgentID != agentID {
		return corral.Internal(op, errors.New("message or run is not of the admitted agent"))
	}
	if terminal && (m.ID != "" || r.MessageID != "") {
		return corral.Internal(op, errors.New("a terminal run has no message"))
	}

	if !terminal {
		var author sql.NullString
		if m.Author != nil {
			author = sql.NullString{String: m.Author.ID, Valid: true}
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO messages (id, agent_id, role, content, author_id, run_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.AgentID, m.Role, m.Content, author, m.RunID, millis(db.orNow(m.CreatedAt)))
		switch {
		case isForeignKey(err):
			return corral.NotFound("user")
		case isUnique(err):
			return conflict("message already exists")
		case err != nil:
			return corral.Internal(op, err)
		}
	}

	var by sql.NullString
	if r.TriggeredBy != nil {
		by = sql.NullString{String: r.TriggeredBy.ID, Valid: true}
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO runs (id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, created_at, driver,
			root_run_id, depth, parent_call)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.AgentID, corral.RunAdmitted, by, r.ParentRunID, r.MessageID, r.StageID,
		millis(db.orNow(r.CreatedAt)), r.Driver, r.Root(), r.Depth, r.ParentCall)
	switch {
	case isForeignKey(err):
		return corral.NotFound("user")
	case isUnique(err) && r.ParentRunID != "":
		return conflict("the parent's call has started a run already")
	case isUnique(err):
		return conflict("run already exists")
	case err != nil:
		return corral.Internal(op, err)
	}
	return nil
}

// Admissions lists an agent's admission evidence, newest first: at most
// limit, 100 when limit <= 0, never more than 1000. An unknown agent has
// none.
func (db *DB) Admissions(ctx context.Context, agentID string, limit int) ([]corral.Admission, error) {
	const op = "sqlite.Admissions"
	rows, err := db.query(ctx, `
		SELECT id, agent_id, user_id, run_id, reason, prompt_bytes,
			runs_admitted, active_runs, tokens_used, tokens_budget, agent_state, at, pending_disk_bytes,
			owner_pending_disk_bytes, server_pending_disk_bytes
		FROM admissions WHERE agent_id = ?
		ORDER BY seq DESC LIMIT ?`, agentID, pageSize(limit))
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	evs, err := collect(rows, func(s scanner) (corral.Admission, error) {
		var ev corral.Admission
		var user sql.NullString
		var at int64
		err := s.Scan(&ev.ID, &ev.AgentID, &user, &ev.RunID, &ev.Reason, &ev.PromptBytes,
			&ev.RunsAdmitted, &ev.ActiveRuns, &ev.TokensUsed, &ev.TokensBudget, &ev.AgentState, &at, &ev.PendingDiskBytes,
			&ev.OwnerPendingDiskBytes, &ev.ServerPendingDiskBytes)
		ev.UserID, ev.At = user.String, fromMillis(at)
		return ev, err
	})
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return evs, nil
}

// runColumns selects a run from runs r joined with users u, the account
// that triggered it; scanRun reads them in this order.
const runColumns = `r.id, r.agent_id, r.status, u.id, u.name, r.parent_run_id, r.message_id,
	r.stage_id, r.change_set_id, r.tokens_input, r.tokens_output, r.violation, r.reason,
	r.created_at, r.started_at, r.ended_at, r.driver, r.root_run_id, r.depth, r.parent_call, r.node_id`

const runFrom = ` FROM runs r LEFT JOIN users u ON u.id = r.triggered_by `

func scanRun(s scanner) (corral.Run, error) {
	var r corral.Run
	var byID, byName sql.NullString
	var created int64
	var started, ended sql.NullInt64
	if err := s.Scan(&r.ID, &r.AgentID, &r.Status, &byID, &byName, &r.ParentRunID, &r.MessageID,
		&r.StageID, &r.ChangeSetID, &r.Tokens.Input, &r.Tokens.Output, &r.Violation, &r.Reason,
		&created, &started, &ended, &r.Driver, &r.RootRunID, &r.Depth, &r.ParentCall, &r.Node); err != nil {
		return corral.Run{}, err
	}
	if byID.Valid {
		r.TriggeredBy = &corral.UserRef{ID: byID.String, Name: byName.String}
	}
	if r.RootRunID == r.ID {
		r.RootRunID = "" // the domain's root (the column holds the id, for one index)
	}
	r.CreatedAt, r.StartedAt, r.EndedAt = fromMillis(created), fromNullMillis(started), fromNullMillis(ended)
	return r, nil
}

// Run returns one run.
func (db *DB) Run(ctx context.Context, id string) (corral.Run, error) {
	return db.oneRun(ctx, "sqlite.Run", `r.id = ?`, id)
}

// oneRun returns the run where holds; ENOTFOUND when none does.
func (db *DB) oneRun(ctx context.Context, op, where string, args ...any) (corral.Run, error) {
	r, err := scanRun(db.queryRow(ctx, `SELECT `+runColumns+runFrom+`WHERE `+where, args...))
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, sql.ErrNoRows):
		return corral.Run{}, corral.NotFound("run")
	default:
		return corral.Run{}, corral.Internal(op, err)
	}
}

// Runs lists an agent's runs, newest admitted first: at most limit, 100
// when limit <= 0, never more than 1000. An unknown agent has none.
func (db *DB) Runs(ctx context.Context, agentID string, limit int) ([]corral.Run, error) {
	return db.runs(ctx, "sqlite.Runs", agentRunsQuery, agentID, pageSize(limit))
}

const agentRunsQuery = `SELECT ` + runColumns + runFrom + `
	WHERE r.agent_id = ? ORDER BY r.seq DESC LIMIT ?`

// RunsIn lists every run whose status is one of statuses, in the order
// they were admitted. No statuses: no runs.
func (db *DB) RunsIn(ctx context.Context, statuses ...corral.RunStatus) ([]corral.Run, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	return db.runs(ctx, "sqlite.RunsIn", runsInQuery(len(statuses)), appendStrings(nil, statuses)...)
}

// runsInQuery lists the runs in any of n statuses, oldest first.
func runsInQuery(n int) string {
	return `SELECT ` + runColumns + runFrom + `
		WHERE r.status IN (` + placeholders(n) + `) ORDER BY r.seq`
}

func (db *DB) runs(ctx context.Context, op, query string, args ...any) ([]corral.Run, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	runs, err := collect(rows, scanRun)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return runs, nil
}

// UpdateRun writes r's status, violation, reason, change set id, and start
// and end times (zero: NULL), only while the stored status is one of from,
// which must not be empty (EINVALID). ENOTFOUND when there is no run r.ID;
// ECONFLICT when its status is not one of from. A status or violation the
// schema does not know is an internal error: it can only be a bug.
func (db *DB) UpdateRun(ctx context.Context, r corral.Run, from ...corral.RunStatus) error {
	const op = "sqlite.UpdateRun"
	if len(from) == 0 {
		return corral.Errorf(corral.EINVALID, "no status to update the run from")
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	res, err := tx.ExecContext(ctx, `
		UPDATE runs SET status = ?1, violation = ?2, reason = ?3, change_set_id = ?4,
			started_at = ?5, ended_at = ?6,
			token_hash = CASE WHEN ?1 = '`+string(corral.RunRunning)+`' THEN token_hash END
		WHERE id = ?7 AND status IN (`+placeholders(len(from))+`)`,
		appendStrings([]any{string(r.Status), string(r.Violation), r.Reason, r.ChangeSetID,
			nullMillis(r.StartedAt), nullMillis(r.EndedAt), r.ID}, from)...)
	if err != nil {
		return corral.Internal(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return corral.Internal(op, err)
	}
	if n == 0 {
		// Still in the transaction: the run cannot appear or go between the
		// update and this read.
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?)`, r.ID).Scan(&exists); err != nil {
			return corral.Internal(op, err)
		}
		if !exists {
			return corral.NotFound("run")
		}
		return conflict("the run's status changed meanwhile")
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}

// SetRunToken keeps the hash of a running run's gateway token.
func (db *DB) SetRunToken(ctx context.Context, runID string, hash []byte) error {
	const op = "sqlite.SetRunToken"
	if len(hash) != 32 {
		return corral.Errorf(corral.EINVALID, "a run token's hash is 32 bytes")
	}
	res, err := db.exec(ctx, `UPDATE runs SET token_hash = ? WHERE id = ? AND status = ?`, hash, runID, corral.RunRunning)
	if err != nil {
		return corral.Internal(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return corral.Internal(op, err)
	} else if n == 0 {
		return conflict("the run is not running")
	}
	return nil
}

// RunByToken returns the running run whose token has hash.
func (db *DB) RunByToken(ctx context.Context, hash []byte) (corral.Run, error) {
	if len(hash) != 32 {
		return corral.Run{}, corral.NotFound("run")
	}
	return db.oneRun(ctx, "sqlite.RunByToken", `r.token_hash = ? AND r.status = ?`, hash, corral.RunRunning)
}

// SaveCheckpoint replaces a run's checkpoint. Empty data removes it, so
// that Checkpoint answers nil and LastCheckpoint passes the run by.
// ENOTFOUND when the run does not exist.
func (db *DB) SaveCheckpoint(ctx context.Context, runID string, data []byte) error {
	const op = "sqlite.SaveCheckpoint"
	if len(data) == 0 {
		data = nil // NULL, not an empty blob
	}
	res, err := db.exec(ctx, `UPDATE runs SET checkpoint = ? WHERE id = ?`, data, runID)
	if err != nil {
		return corral.Internal(op, err)
	}
	return rowsAffected(op, "run", res)
}

// Checkpoint returns a run's checkpoint, nil when it has none. ENOTFOUND
// when the run does not exist.
func (db *DB) Checkpoint(ctx context.Context, runID string) ([]byte, error) {
	var data []byte
	err := db.queryRow(ctx, `SELECT checkpoint FROM runs WHERE id = ?`, runID).Scan(&data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, corral.NotFound("run")
	case err != nil:
		return nil, corral.Internal("sqlite.Checkpoint", err)
	}
	return data, nil
}

// LastCheckpoint returns the checkpoint of the agent's most recently
// admitted run that has one, and that run's id: "" and nil when none has,
// an unknown agent included.
func (db *DB) LastCheckpoint(ctx context.Context, agentID string) (string, []byte, error) {
	var id string
	var data []byte
	err := db.queryRow(ctx, `
		SELECT id, checkpoint FROM runs
		WHERE agent_id = ? AND checkpoint IS NOT NULL
		ORDER BY seq DESC LIMIT 1`, agentID).Scan(&id, &data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil, nil
	case err != nil:
		return "", nil, corral.Internal("sqlite.LastCheckpoint", err)
	}
	return id, data, nil
}

// SetAgentState moves an agent to state to if its state is one of from,
// and reports whether it did. Besides the state it writes only updated_at
// (the store's clock): never a setting nor the budget, so that it cannot
// undo an edit made meanwhile. EINVALID when to or any of from is not an
// agent state, or from is empty; ENOTFOUND when the agent does not exist.
func (db *DB) SetAgentState(ctx context.Context, agentID string, to corral.AgentState, from ...corral.AgentState) (bool, error) {
	const op = "sqlite.SetAgentState"
	if !to.Valid() {
		return false, corral.Errorf(corral.EINVALID, "an agent's state must be active, paused or quarantined")
	}
	if len(from) == 0 {
		return false, corral.Errorf(corral.EINVALID, "no state to move the agent from")
	}
	for _, s := range from {
		if !s.Valid() {
			return false, corral.Errorf(corral.EINVALID, "an agent's state must be active, paused or quarantined")
		}
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return false, corral.Internal(op, err)
	}
	defer rollback(tx)
	res, err := tx.ExecContext(ctx, `
		UPDATE agents SET state = ?, updated_at = ?
		WHERE id = ? AND state IN (`+placeholders(len(from))+`)`,
		appendStrings([]any{string(to), millis(db.now()), agentID}, from)...)
	if err != nil {
		return false, corral.Internal(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, corral.Internal(op, err)
	}
	if n == 0 {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?)`, agentID).Scan(&exists); err != nil {
			return false, corral.Internal(op, err)
		}
		if !exists {
			return false, corral.NotFound("agent")
		}
		return false, nil
	}
	if err := tx.Commit(); err != nil {
		return false, corral.Internal(op, err)
	}
	return true, nil
}

// CountViolations counts the agent's runs that ended with a violation at
// or after since. An unknown agent has none.
func (db *DB) CountViolations(ctx context.Context, agentID string, since time.Time) (int64, error) {
	var n int64
	err := db.queryRow(ctx, violationsQuery, agentID, millis(since)).Scan(&n)
	if err != nil {
		return 0, corral.Internal("sqlite.CountViolations", err)
	}
	return n, nil
}

// violationsQuery tests the violation exactly as the WHERE of the partial
// index runs_agent_violations does, so that SQLite can use the index.
const violationsQuery = `SELECT count(*) FROM runs
	WHERE agent_id = ? AND violation != '' AND ended_at >= ?`

// ChildRun returns the run a parent's tool call started.
func (db *DB) ChildRun(ctx context.Context, parentID, call string) (corral.Run, error) {
	if parentID == "" {
		return corral.Run{}, corral.NotFound("run")
	}
	return db.oneRun(ctx, "sqlite.ChildRun", `r.parent_run_id = ? AND r.parent_call = ?`, parentID, call)
}

// TreeRuns lists a tree's runs, oldest first: at most maxRuns, which the
// tree caps keep far above any real tree.
func (db *DB) TreeRuns(ctx context.Context, rootID string) ([]corral.Run, error) {
	const op = "sqlite.TreeRuns"
	rows, err := db.query(ctx, `SELECT `+runColumns+runFrom+`WHERE r.root_run_id = ? ORDER BY r.seq LIMIT ?`, rootID, maxRuns)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	runs, err := collect(rows, scanRun)
	if err != nil {
		return nil, corral.Internal(op, err)
	}
	return runs, nil
}

// TreeTokens sums a tree's tokens, input and output.
func (db *DB) TreeTokens(ctx context.Context, rootID string) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT coalesce(sum(tokens_input + tokens_output), 0) FROM runs WHERE root_run_id = ?`, rootID).Scan(&n)
	if err != nil {
		return 0, corral.Internal("sqlite.TreeTokens", err)
	}
	return n, nil
}

// AgentsCreatedInTree counts the agents a tree's runs created.
func (db *DB) AgentsCreatedInTree(ctx context.Context, rootID string) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT count(*) FROM agents a JOIN runs r ON r.id = a.created_by_run
		WHERE a.created_by_run != '' AND r.root_run_id = ?`, rootID).Scan(&n)
	if err != nil {
		return 0, corral.Internal("sqlite.AgentsCreatedInTree", err)
	}
	return n, nil
}
