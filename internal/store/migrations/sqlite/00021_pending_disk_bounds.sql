-- Bounds per person and per server on what pending change sets hold on
-- the host's disk: admission sums, in its transaction, the pending sets of
-- the agent, of all its owner's agents and of every agent, and keeps the
-- three sums as evidence; it may refuse with 'pending_disk_user' or
-- 'pending_disk_server'.
--
-- One partial index serves the three sums from the index alone (agent_id
-- for the agent's and, through agents_owner_id, the owner's; the whole
-- index for the server's): it replaces change_sets_agent_pending, which
-- it covers. The admissions' reasons gain the two refusals; SQLite cannot
-- change a CHECK in place, so the table is rebuilt as in 00014.

-- +goose Up
CREATE INDEX change_sets_pending_disk ON change_sets(agent_id, disk_bytes) WHERE status = 'pending';
DROP INDEX change_sets_agent_pending;

CREATE TABLE admissions_v21 (
    seq                       INTEGER PRIMARY KEY AUTOINCREMENT,
    id                        TEXT NOT NULL UNIQUE,
    agent_id                  TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id                   TEXT REFERENCES users(id) ON DELETE SET NULL,
    run_id                    TEXT NOT NULL DEFAULT '',
    reason                    TEXT NOT NULL DEFAULT '' CHECK (reason IN ('', 'quarantined', 'paused',
                                  'prompt_too_large', 'budget_exhausted', 'disk_quota',
                                  'pending_disk_user', 'pending_disk_server', 'run_limit', 'busy',
                                  'delegation_depth', 'delegation_fanout', 'delegation_concurrency')),
    prompt_bytes              INTEGER NOT NULL CHECK (prompt_bytes >= 0),
    runs_admitted             INTEGER NOT NULL CHECK (runs_admitted >= 0),
    active_runs               INTEGER NOT NULL CHECK (active_runs >= 0),
    tokens_used               INTEGER NOT NULL CHECK (tokens_used >= 0),
    tokens_budget             INTEGER NOT NULL CHECK (tokens_budget >= 0),
    agent_state               TEXT NOT NULL CHECK (agent_state IN ('active', 'paused', 'quarantined')),
    at                        INTEGER NOT NULL,
    pending_disk_bytes        INTEGER NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0),
    owner_pending_disk_bytes  INTEGER NOT NULL DEFAULT 0 CHECK (owner_pending_disk_bytes >= 0),
    server_pending_disk_bytes INTEGER NOT NULL DEFAULT 0 CHECK (server_pending_disk_bytes >= 0),
    CHECK ((reason = '') = (run_id != ''))
) STRICT;
INSERT INTO admissions_v21 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes FROM admissions;
DELETE FROM sqlite_sequence WHERE name = 'admissions_v21';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v21', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v21 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

-- +goose Down
-- Refusals for the new bounds cannot be kept under the old reasons: they go.
CREATE TABLE admissions_v20 (
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
INSERT INTO admissions_v20 (seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes)
    SELECT seq, id, agent_id, user_id, run_id, reason, prompt_bytes, runs_admitted, active_runs,
        tokens_used, tokens_budget, agent_state, at, pending_disk_bytes FROM admissions
    WHERE reason NOT IN ('pending_disk_user', 'pending_disk_server');
DELETE FROM sqlite_sequence WHERE name = 'admissions_v20';
INSERT INTO sqlite_sequence (name, seq) SELECT 'admissions_v20', seq FROM sqlite_sequence WHERE name = 'admissions';
DROP TABLE admissions;
ALTER TABLE admissions_v20 RENAME TO admissions;
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);

CREATE INDEX change_sets_agent_pending ON change_sets(agent_id) WHERE status = 'pending';
DROP INDEX change_sets_pending_disk;
