package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"corral"
)

// Reserve holds h.Tokens of an agent's budget for one model call. The
// check and the hold are one UPDATE, so any number of calls at once, from
// any number of runs or connections, never hold more than is left.
func (db *DB) Reserve(ctx context.Context, h corral.Hold) (corral.Reservation, error) {
	const op = "sqlite.Reserve"
	agentID, runID, tokens := h.AgentID, h.RunID, h.Tokens
	if tokens <= 0 {
		return corral.Reservation{}, corral.Errorf(corral.EINVALID, "a reservation holds at least one token")
	}
	// A reservation is committed without waiting for the disk (SQLite's
	// synchronous NORMAL in WAL mode, PostgreSQL's synchronous_commit
	// off): it survives a crash of the server that made it, which is what
	// it guards against (the call in flight dies with the server, and the
	// next start settles it at its ceiling), but not of the machine or
	// the database before the next commit, which the settlement's (durable)
	// is. It saves a flush on every model call.
	tx, done, err := db.beginReserve(ctx)
	if err != nil {
		return corral.Reservation{}, corral.Internal(op, err)
	}
	defer done()
	defer rollback(tx)
	res := corral.Reservation{ID: corral.NewID("rsv"), Tokens: tokens}
	err = tx.QueryRowContext(ctx, `
		UPDATE agents SET budget_reserved = budget_reserved + ?2
		WHERE id = ?1 AND (budget_tokens = 0 OR budget_used + budget_reserved + ?2 <= budget_tokens)
		RETURNING budget_tokens, budget_used, budget_reserved`, agentID, tokens,
	).Scan(&res.Budget.Tokens, &res.Budget.Used, &res.Budget.Reserved)
	if errors.Is(err, sql.ErrNoRows) {
		var b corral.Budget
		err := tx.QueryRowContext(ctx, `SELECT budget_tokens, budget_used, budget_reserved FROM agents WHERE id = ?`, agentID).
			Scan(&b.Tokens, &b.Used, &b.Reserved)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return corral.Reservation{}, corral.NotFound("agent")
		case err != nil:
			return corral.Reservation{}, corral.Internal(op, err)
		}
		return corral.Reservation{}, &corral.Error{Code: corral.EADMISSION, Reason: corral.ReasonBudgetExhausted,
			Message: fmt.Sprintf("the agent's token budget cannot hold this call: it may take up to %d tokens, and %d of %d are left (%d used, %d held by calls in flight)",
				tokens, b.Left(), b.Tokens, b.Used, b.Reserved)}
	}
	if err != nil {
		return corral.Reservation{}, corral.Internal(op, err)
	}
	var run sql.NullString
	if runID != "" {
		run = sql.NullString{String: runID, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO reservations (id, agent_id, run_id, tokens, created_at, model, user_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		res.ID, agentID, run, tokens, millis(db.orNow(time.Time{})), h.Model, h.UserID); err != nil {
		if isForeignKey(err) {
			return corral.Reservation{}, corral.NotFound("run")
		}
		return corral.Reservation{}, corral.Internal(op, err)
	}
	if err := tx.Commit(); err != nil {
		return corral.Reservation{}, corral.Internal(op, err)
	}
	return res, nil
}

// beginReserve begins a write transaction whose commit does not wait for
// the disk; done gives its connection back.
func (db *DB) beginReserve(ctx context.Context) (*txn, func(), error) {
	if db.pg {
		tx, err := db.begin(ctx)
		if err != nil {
			return nil, nil, err
		}
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			rollback(tx)
			return nil, nil, err
		}
		return tx, func() {}, nil
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	done := func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); err != nil {
			// Never leave the writer short of FULL: the pool drops this
			// connection and opens a new one with the DSN's pragmas.
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		done()
		return nil, nil, err
	}
	return &txn{Tx: tx}, done, nil
}

// Settle ends a reservation with what its call spent, at time at (zero:
// the store's clock). Usage counts whatever the run's status: tokens a
// provider billed after a cancel were still spent.
func (db *DB) Settle(ctx context.Context, id string, t corral.Tokens, at time.Time) (corral.Budget, error) {
	const op = "sqlite.Settle"
	if t.Input < 0 || t.Output < 0 {
		return corral.Budget{}, corral.Errorf(corral.EINVALID, "token counts cannot be negative")
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Budget{}, corral.Internal(op, err)
	}
	defer rollback(tx)
	b, err := settle(ctx, tx, id, db.orNow(at), func(held int64) (corral.Tokens, error) {
		if t.Input > held || t.Output > held-t.Input {
			return corral.Tokens{}, corral.Errorf(corral.EINVALID, "a call cannot spend more than it reserved (%d tokens)", held)
		}
		return t, nil
	})
	if err != nil {
		return corral.Budget{}, err
	}
	if err := tx.Commit(); err != nil {
		return corral.Budget{}, corral.Internal(op, err)
	}
	return b, nil
}

// settle deletes reservation id and moves what spent says of its tokens
// into the run's and the agent's usage, and keeps them as the call's, at.
func settle(ctx context.Context, tx *txn, id string, at time.Time, spent func(held int64) (corral.Tokens, error)) (corral.Budget, error) {
	const op = "sqlite.Settle"
	var agentID, model, userID string
	var runID sql.NullString
	var held int64
	err := tx.QueryRowContext(ctx, `DELETE FROM reservations WHERE id = ? RETURNING agent_id, run_id, tokens, model, user_id`, id).
		Scan(&agentID, &runID, &held, &model, &userID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.Budget{}, corral.NotFound("reservation")
	case err != nil:
		return corral.Budget{}, corral.Internal(op, err)
	}
	t, err := spent(held)
	if err != nil {
		return corral.Budget{}, err
	}
	if runID.Valid {
		// A run's calls are its trigger's, whatever the hold said.
		var by sql.NullString
		if err := tx.QueryRowContext(ctx, `
			UPDATE runs SET tokens_input = tokens_input + ?, tokens_output = tokens_output + ?
			WHERE id = ? RETURNING triggered_by`, t.Input, t.Output, runID.String).Scan(&by); err != nil {
			return corral.Budget{}, corral.Internal(op, err) // reservations cascade with their run
		}
		userID = by.String
	}
	// updated_at stays: metering is not an edit of the agent's settings.
	var b corral.Budget
	var owner string
	if err := tx.QueryRowContext(ctx, `
		UPDATE agents SET budget_used = budget_used + ?, budget_reserved = budget_reserved - ?
		WHERE id = ? RETURNING budget_tokens, budget_used, budget_reserved, owner_id`, t.Input+t.Output, held, agentID,
	).Scan(&b.Tokens, &b.Used, &b.Reserved, &owner); err != nil {
		return corral.Budget{}, corral.Internal(op, err) // reservations cascade with their agent
	}
	if t.Input+t.Output > 0 {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO usage (at, agent_id, owner_id, user_id, run_id, model, input, output)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			millis(at), agentID, owner, userID, runID.String, model, t.Input, t.Output); err != nil {
			return corral.Budget{}, corral.Internal(op, err)
		}
	}
	return b, nil
}

// SettleLeftover settles every reservation at its ceiling: called when a
// server starts, before any call is made, when none can be in flight.
func (db *DB) SettleLeftover(ctx context.Context) (int, error) {
	const op = "sqlite.SettleLeftover"
	tx, err := db.begin(ctx)
	if err != nil {
		return 0, corral.Internal(op, err)
	}
	defer rollback(tx)
	rows, err := tx.QueryContext(ctx, `SELECT id FROM reservations ORDER BY created_at`)
	if err != nil {
		return 0, corral.Internal(op, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, corral.Internal(op, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, corral.Internal(op, err)
	}
	now := db.now()
	for _, id := range ids {
		if _, err := settle(ctx, tx, id, now, func(held int64) (corral.Tokens, error) {
			return corral.Tokens{Input: held}, nil
		}); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, corral.Internal(op, err)
	}
	return len(ids), nil
}

// CreateAgentFrom stores a, its budget carved out of parentID's.
func (db *DB) CreateAgentFrom(ctx context.Context, a corral.Agent, parentID string) error {
	const op = "sqlite.CreateAgentFrom"
	if a.Budget.Tokens <= 0 {
		return corral.Errorf(corral.EINVALID, "an agent whose budget is carved out of another's has one")
	}
	tx, err := db.begin(ctx)
	if err != nil {
		return corral.Internal(op, err)
	}
	defer rollback(tx)
	var b corral.Budget
	err = tx.QueryRowContext(ctx, `SELECT budget_tokens, budget_used, budget_reserved FROM agents WHERE id = ?`, parentID).
		Scan(&b.Tokens, &b.Used, &b.Reserved)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return corral.NotFound("agent")
	case err != nil:
		return corral.Internal(op, err)
	}
	if b.Tokens > 0 {
		if b.Left() < a.Budget.Tokens {
			return &corral.Error{Code: corral.EADMISSION, Reason: corral.ReasonBudgetExhausted,
				Message: fmt.Sprintf("budget_tokens %d is more than this agent has left (%d of %d)", a.Budget.Tokens, b.Left(), b.Tokens)}
		}
		// One transaction holds the write lock from the read on: nothing
		// can spend or carve the parent's budget in between.
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET budget_used = budget_used + ? WHERE id = ?`, a.Budget.Tokens, parentID); err != nil {
			return corral.Internal(op, err)
		}
	}
	if err := insertAgent(ctx, tx, db.orNow(a.CreatedAt), a); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return corral.Internal(op, err)
	}
	return nil
}
