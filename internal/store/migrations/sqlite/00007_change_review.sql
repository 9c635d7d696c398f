-- Review that survives the decision: each entry keeps its unified diff and
-- a note saying why it is flagged; entries are decided one by one
-- (partial approval), so an entry can be rejected or conflicted on its own.
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt.

-- +goose Up
CREATE TABLE change_entries_v7 (
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
    state         TEXT NOT NULL CHECK (state IN ('pending', 'applied', 'rejected', 'denied', 'conflicted', 'dropped')),
    note          TEXT NOT NULL DEFAULT '',
    -- Last: lists read the columns before it and never load a large diff.
    diff          TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (change_set_id, path)
) STRICT;
INSERT INTO change_entries_v7 (change_set_id, path, op, old_sha256, new_sha256, size, mode, old_mode, class, flags, state)
    SELECT change_set_id, path, op, old_sha256, new_sha256, size, mode, old_mode, class, flags, state FROM change_entries;
DROP TABLE change_entries;
ALTER TABLE change_entries_v7 RENAME TO change_entries;

-- +goose Down
CREATE TABLE change_entries_v2 (
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
INSERT INTO change_entries_v2 SELECT change_set_id, path, op, old_sha256, new_sha256, size, mode, old_mode, class, flags,
    CASE WHEN state IN ('rejected', 'conflicted') THEN 'dropped' ELSE state END FROM change_entries;
DROP TABLE change_entries;
ALTER TABLE change_entries_v2 RENAME TO change_entries;
