-- Change sets: what a run proposes to change in an agent's workspace, as
-- Corral measured it, and what became of each path.

-- +goose Up
CREATE TABLE change_sets (
    id         TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    run_id     TEXT NOT NULL DEFAULT '',
    status     TEXT NOT NULL CHECK (status IN ('pending', 'applied', 'rejected', 'denied', 'conflicted', 'expired', 'failed')),
    mode       TEXT NOT NULL CHECK (mode IN ('review', 'auto')),
    stage_dir  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_by TEXT REFERENCES users(id) ON DELETE SET NULL,
    decided_at INTEGER
) STRICT;
CREATE INDEX change_sets_agent ON change_sets(agent_id, created_at);
CREATE INDEX change_sets_pending ON change_sets(status) WHERE status = 'pending';

CREATE TABLE change_entries (
    change_set_id TEXT NOT NULL REFERENCES change_sets(id) ON DELETE CASCADE,
    path          TEXT NOT NULL,
    op            TEXT NOT NULL CHECK (op IN ('create', 'modify', 'delete')),
    old_sha256    TEXT NOT NULL,
    new_sha256    TEXT NOT NULL,
    size          INTEGER NOT NULL CHECK (size >= 0),
    mode          INTEGER NOT NULL,
    old_mode      INTEGER NOT NULL,
    class         TEXT NOT NULL CHECK (class IN ('ordinary', 'risky', 'protected')),
    flags         TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'denied', 'dropped')),
    PRIMARY KEY (change_set_id, path)
) STRICT;

-- +goose Down
DROP TABLE change_entries;
DROP TABLE change_sets;
