-- Runs: one piece of work an agent does for one message, with its token
-- usage and its latest checkpoint; and the evidence of every admission
-- decision, admitted or refused.
--
-- seq orders rows by when they were inserted: ids are random, and times
-- can be equal or come from a clock that stepped back.

-- +goose Up
CREATE TABLE runs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    status        TEXT NOT NULL CHECK (status IN ('admitted', 'running', 'paused',
                      'completed', 'cancelled', 'killed', 'errored', 'reconciled')),
    triggered_by  TEXT REFERENCES users(id) ON DELETE SET NULL,
    parent_run_id TEXT NOT NULL DEFAULT '',
    message_id    TEXT NOT NULL DEFAULT '',
    stage_id      TEXT NOT NULL DEFAULT '',
    change_set_id TEXT NOT NULL DEFAULT '',
    tokens_input  INTEGER NOT NULL DEFAULT 0 CHECK (tokens_input >= 0),
    tokens_output INTEGER NOT NULL DEFAULT 0 CHECK (tokens_output >= 0),
    violation     TEXT NOT NULL DEFAULT '' CHECK (violation IN ('', 'timeout', 'memory', 'pids', 'cpu', 'output')),
    reason        TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER,
    -- Last, so that reading the columns before it never loads a large
    -- checkpoint's overflow pages.
    checkpoint    BLOB
) STRICT;
CREATE INDEX runs_agent_seq ON runs(agent_id, seq);
CREATE INDEX runs_status_seq ON runs(status, seq);
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';
CREATE INDEX runs_triggered_by ON runs(triggered_by);

-- Sizes and counts only: there is deliberately no column that could hold
-- the text of a prompt.
CREATE TABLE admissions (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id       TEXT REFERENCES users(id) ON DELETE SET NULL,
    run_id        TEXT NOT NULL DEFAULT '',
    reason        TEXT NOT NULL DEFAULT '' CHECK (reason IN ('', 'quarantined', 'paused',
                      'prompt_too_large', 'budget_exhausted', 'run_limit', 'busy')),
    prompt_bytes  INTEGER NOT NULL CHECK (prompt_bytes >= 0),
    runs_admitted INTEGER NOT NULL CHECK (runs_admitted >= 0),
    active_runs   INTEGER NOT NULL CHECK (active_runs >= 0),
    tokens_used   INTEGER NOT NULL CHECK (tokens_used >= 0),
    tokens_budget INTEGER NOT NULL CHECK (tokens_budget >= 0),
    agent_state   TEXT NOT NULL CHECK (agent_state IN ('active', 'paused', 'quarantined')),
    at            INTEGER NOT NULL,
    -- Admitted exactly when a run was started.
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

-- +goose Down
DROP TABLE admissions;
DROP TABLE runs;
