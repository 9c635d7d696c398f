-- Delegation: a run may be started by another run's tool call. Every run
-- records the root of its tree (itself for a run a person started), its
-- depth and the parent's call that started it (one call starts at most
-- one run, so asking again after a restart finds it); an agent records the
-- run that created it, so a tree's creations can be counted. The
-- admissions' reasons gain the tree caps; SQLite cannot change a CHECK in
-- place, so the table is rebuilt as in 00006.

-- +goose Up
ALTER TABLE runs ADD COLUMN root_run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0);
ALTER TABLE runs ADD COLUMN parent_call TEXT NOT NULL DEFAULT '';
UPDATE runs SET root_run_id = id;
CREATE INDEX runs_root ON runs(root_run_id);
CREATE UNIQUE INDEX runs_parent_call ON runs(parent_run_id, parent_call) WHERE parent_run_id != '';
ALTER TABLE agents ADD COLUMN created_by_run TEXT NOT NULL DEFAULT '';
CREATE INDEX agents_created_by_run ON agents(created_by_run) WHERE created_by_run != '';

CREATE TABLE admissions_v14 (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT NOT NULL UNIQUE,
    agent_id           TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id            TEXT REFERENCES users(id) ON DELETE SET NULL,
    run_id             TEXT NOT NULL DEFAULT '',
    reason             TEXT NOT NULL DEFAULT '' CHECK (reason IN ('', 'quarantined', 'paused',
                           'prompt_too_large', 'budget_exhausted', 'disk_quota', 'run_limit', 'busy',
                           'delegation_depth', 'delegation_fanout', 'delegation_concurrency')),
    prompt_bytes       INTEGER NOT NULL CHECK (prompt_bytes >= 0),
    runs_admitted      INTEGER NOT NULL CHECK (runs_admitted >= 0),
    active_runs        INTEGER NOT NULL CHECK (active_runs >= 0),
    tokens_used        INTEGER NOT NULL CHECK (tokens_used >= 0),
    tokens_budget      INTEGER NOT NULL CHECK (tokens_budget >= 0),
    agent_state        TEXT NOT NULL CHECK (agent_state IN ('active', 'paused', 'quarantined')),
    at                 INTEGER NOT NULL,
    pending_disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0),
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
INSERT INTO admissions_v14 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes FROM admissions;
DELETE FROM sqlite_sequence WHERE name = 'admissions_v14';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v14', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v14 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

-- +goose Down
-- Refusals for a tree's caps cannot be kept under the old reasons: they go.
CREATE TABLE admissions_v13 (
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
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
INSERT INTO admissions_v13 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes FROM admissions
    WHERE reason NOT IN ('delegation_depth', 'delegation_fanout', 'delegation_concurrency');
DELETE FROM sqlite_sequence WHERE name = 'admissions_v13';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v13', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v13 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);
DROP INDEX agents_created_by_run;
ALTER TABLE agents DROP COLUMN created_by_run;
DROP INDEX runs_parent_call;
DROP INDEX runs_root;
ALTER TABLE runs DROP COLUMN parent_call;
ALTER TABLE runs DROP COLUMN depth;
ALTER TABLE runs DROP COLUMN root_run_id;
