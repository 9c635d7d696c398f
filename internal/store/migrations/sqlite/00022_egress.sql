-- Egress: an agent's runs may reach an allow-list of hosts through the
-- egress proxy (network 'allowlist'); the list itself is kept with the
-- agent's other policy lists in the globs JSON column. SQLite cannot change
-- a CHECK in place, but a column whose CHECK is its own can be dropped and
-- added again: every existing row was 'none', the new column's default.
--
-- A run the egress proxy's caps end has the violation 'egress': the runs'
-- violation column is copied into one with the wider CHECK and takes its
-- place (with its index), since a table rebuild would have to repeat
-- every column runs has gained.
--
-- agent_secrets are the values the proxy adds as a header to requests for
-- one host, sealed with the server's secret key (bound to the row's id,
-- agent and host, as credentials are); the value is never read back out.

-- +goose Up
ALTER TABLE agents DROP COLUMN network;
ALTER TABLE agents ADD COLUMN network TEXT NOT NULL DEFAULT 'none' CHECK (network IN ('none', 'allowlist'));

CREATE TABLE agent_secrets (
    id         TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    host       TEXT NOT NULL,
    header     TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (agent_id, name)
) STRICT;

DROP INDEX runs_agent_violations;
ALTER TABLE runs ADD COLUMN violation_v22 TEXT NOT NULL DEFAULT ''
    CHECK (violation_v22 IN ('', 'timeout', 'memory', 'pids', 'cpu', 'output', 'disk', 'egress'));
UPDATE runs SET violation_v22 = violation;
ALTER TABLE runs DROP COLUMN violation;
ALTER TABLE runs RENAME COLUMN violation_v22 TO violation;
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';

-- +goose Down
-- An egress violation has no name under the old CHECK: it is kept as the
-- run's reason alone.
DROP INDEX runs_agent_violations;
ALTER TABLE runs ADD COLUMN violation_v21 TEXT NOT NULL DEFAULT ''
    CHECK (violation_v21 IN ('', 'timeout', 'memory', 'pids', 'cpu', 'output', 'disk'));
UPDATE runs SET violation_v21 = CASE violation WHEN 'egress' THEN '' ELSE violation END;
ALTER TABLE runs DROP COLUMN violation;
ALTER TABLE runs RENAME COLUMN violation_v21 TO violation;
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';

DROP TABLE agent_secrets;
ALTER TABLE agents DROP COLUMN network;
ALTER TABLE agents ADD COLUMN network TEXT NOT NULL DEFAULT 'none' CHECK (network IN ('none'));
