-- Egress: an agent's runs may reach an allow-list of hosts through the
-- egress proxy (network 'allowlist'); the list itself is kept with the
-- agent's other policy lists in the globs JSON column. SQLite cannot change
-- a CHECK in place, but a column whose CHECK is its own can be dropped and
-- added again: every existing row was 'none', the new column's default.
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

-- +goose Down
DROP TABLE agent_secrets;
ALTER TABLE agents DROP COLUMN network;
ALTER TABLE agents ADD COLUMN network TEXT NOT NULL DEFAULT 'none' CHECK (network IN ('none'));
