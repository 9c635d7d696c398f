-- Sandbox nodes (the split roles): a node joins once with a one-time join
-- token, then holds short-lived credentials control rotates. Only hashes
-- of the secrets are kept. Each agent is placed on the node that holds its
-- workspace.

-- +goose Up
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    draining INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
    last_seen_at INTEGER,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE node_join_tokens (
    token_hash BLOB PRIMARY KEY,
    expires_at INTEGER NOT NULL,
    used_by TEXT REFERENCES nodes(id) ON DELETE SET NULL,
    used_at INTEGER
) STRICT;

CREATE TABLE node_credentials (
    credential_hash BLOB PRIMARY KEY,
    node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX node_credentials_node ON node_credentials(node_id);

-- The node that holds an agent's workspace (and so runs its sessions):
-- set when the agent is first placed, kept until the workspace is moved.
ALTER TABLE agents ADD COLUMN node_id TEXT REFERENCES nodes(id) ON DELETE SET NULL;
-- And the node each run's session ran on.
ALTER TABLE runs ADD COLUMN node_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN node_id;
ALTER TABLE agents DROP COLUMN node_id;
DROP TABLE node_credentials;
DROP TABLE node_join_tokens;
DROP TABLE nodes;
