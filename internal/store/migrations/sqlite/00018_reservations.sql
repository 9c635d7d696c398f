-- Budgets that hold under concurrency: before a model call is sent, its
-- ceiling is reserved against the agent's budget (what is left is
-- budget_tokens - budget_used - budget_reserved), and settled on the
-- provider's usage. A reservation outlives a server that stops
-- mid-call: the next start settles it at its ceiling.

-- +goose Up
ALTER TABLE agents ADD COLUMN budget_reserved INTEGER NOT NULL DEFAULT 0 CHECK (budget_reserved >= 0);

CREATE TABLE reservations (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    run_id TEXT REFERENCES runs(id) ON DELETE CASCADE,
    tokens INTEGER NOT NULL CHECK (tokens > 0),
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX reservations_agent ON reservations(agent_id);
CREATE INDEX reservations_run ON reservations(run_id);

-- +goose Down
DROP TABLE reservations;
ALTER TABLE agents DROP COLUMN budget_reserved;
