-- The git repository an agent's persistent workspace is a clone of (at
-- most one per agent). The repository itself is on disk under the
-- workspace; this row says where it came from, how the clone went, and
-- the last push. pending holds applied paths whose commit failed, as a
-- JSON array, so the next commit includes them.

-- +goose Up
CREATE TABLE repositories (
    agent_id      TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    url           TEXT NOT NULL,
    ref           TEXT NOT NULL DEFAULT '',
    credential_id TEXT NOT NULL DEFAULT '',
    head          TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL CHECK (status IN ('cloning', 'ready', 'failed')),
    error         TEXT NOT NULL DEFAULT '',
    pending       TEXT NOT NULL DEFAULT '[]',
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    push_branch   TEXT NOT NULL DEFAULT '',
    push_head     TEXT NOT NULL DEFAULT '',
    push_at       INTEGER,
    push_by       TEXT NOT NULL DEFAULT '',
    push_by_name  TEXT NOT NULL DEFAULT ''
) STRICT;

-- +goose Down
DROP TABLE repositories;
