-- Disk limits: what one run may write into its staged tree (disk_bytes,
-- disk_inodes), what an agent's pending change sets may hold on the host's
-- disk (pending_disk_bytes), what each change set holds, the run's
-- violation 'disk' and the admission refusal 'disk_quota'.
--
-- SQLite cannot change a CHECK constraint in place: runs and admissions
-- are rebuilt, rows, seq numbers (and the AUTOINCREMENT counters behind
-- them) and indexes kept. No table refers to either with a foreign key, so
-- dropping the old table cascades nowhere.

-- +goose Up
ALTER TABLE agents ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0);
ALTER TABLE agents ADD COLUMN disk_inodes INTEGER NOT NULL DEFAULT 0 CHECK (disk_inodes >= 0);
ALTER TABLE agents ADD COLUMN pending_disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0);

ALTER TABLE change_sets ADD COLUMN disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0);
-- Admission sums an agent's pending change sets.
CREATE INDEX change_sets_agent_pending ON change_sets(agent_id) WHERE status = 'pending';

CREATE TABLE runs_v6 (
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
    violation     TEXT NOT NULL DEFAULT '' CHECK (violation IN ('', 'timeout', 'memory', 'pids', 'cpu', 'output', 'disk')),
    reason        TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER,
    -- Last, so that reading the columns before it never loads a large
    -- checkpoint's overflow pages.
    checkpoint    BLOB
) STRICT;
INSERT INTO runs_v6 (seq, id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, change_set_id,
        tokens_input, tokens_output, violation, reason, created_at, started_at, ended_at, checkpoint)
    SELECT seq, id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, change_set_id,
        tokens_input, tokens_output, violation, reason, created_at, started_at, ended_at, checkpoint FROM runs;
-- The counter, not max(seq): a deleted newest run's seq is never reused.
DELETE FROM sqlite_sequence WHERE name = 'runs_v6';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v6', seq FROM sqlite_sequence WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_v6 RENAME TO runs;
CREATE INDEX runs_agent_seq ON runs(agent_id, seq);
CREATE INDEX runs_status_seq ON runs(status, seq);
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';
CREATE INDEX runs_triggered_by ON runs(triggered_by);

-- Sizes and counts only: there is deliberately no column that could hold
-- the text of a prompt.
CREATE TABLE admissions_v6 (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT NOT NULL UNIQUE,
    agent_id           TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id            TEXT REFERENCES users(id) ON DELETE SET NULL,
    run_id             TEXT NOT NULL DEFAULT '',
    reason             TEXT NOT NULL DEFAULT '' CHECK (reason IN ('', 'quarantined', 'paused',
                           'prompt_too_large', 'budget_exhausted', 'disk_quota', 'run_limit', 'busy')),
    prompt_bytes       INTEGER NOT NULL CHECK (prompt_bytes >= 0),
    runs_admitted      INTEGER NOT NULL CHECK (runs_admitted >= 0),
    active_runs        INTEGER NOT NULL CHECK (active_runs >= 0),
    tokens_used        INTEGER NOT NULL CHECK (tokens_used >= 0),
    tokens_budget      INTEGER NOT NULL CHECK (tokens_budget >= 0),
    agent_state        TEXT NOT NULL CHECK (agent_state IN ('active', 'paused', 'quarantined')),
    at                 INTEGER NOT NULL,
    pending_disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0),
    -- Admitted exactly when a run was started.
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
INSERT INTO admissions_v6 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at FROM admissions;
DELETE FROM sqlite_sequence WHERE name = 'admissions_v6';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v6', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v6 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

-- +goose Down
-- The old constraints cannot hold what is new: a disk violation becomes
-- none, and disk_quota refusals go.
CREATE TABLE runs_v5 (
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
    checkpoint    BLOB
) STRICT;
INSERT INTO runs_v5 (seq, id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, change_set_id,
        tokens_input, tokens_output, violation, reason, created_at, started_at, ended_at, checkpoint)
    SELECT seq, id, agent_id, status, triggered_by, parent_run_id, message_id, stage_id, change_set_id,
        tokens_input, tokens_output, CASE violation WHEN 'disk' THEN '' ELSE violation END, reason,
        created_at, started_at, ended_at, checkpoint FROM runs;
DELETE FROM sqlite_sequence WHERE name = 'runs_v5';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v5', seq FROM sqlite_sequence WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_v5 RENAME TO runs;
CREATE INDEX runs_agent_seq ON runs(agent_id, seq);
CREATE INDEX runs_status_seq ON runs(status, seq);
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';
CREATE INDEX runs_triggered_by ON runs(triggered_by);

CREATE TABLE admissions_v5 (
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
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
INSERT INTO admissions_v5 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at FROM admissions WHERE reason != 'disk_quota';
DELETE FROM sqlite_sequence WHERE name = 'admissions_v5';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v5', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v5 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

DROP INDEX change_sets_agent_pending;
ALTER TABLE change_sets DROP COLUMN disk_bytes;
ALTER TABLE agents DROP COLUMN pending_disk_bytes;
ALTER TABLE agents DROP COLUMN disk_inodes;
ALTER TABLE agents DROP COLUMN disk_bytes;
