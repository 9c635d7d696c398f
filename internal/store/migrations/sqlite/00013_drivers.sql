-- Agent drivers: an agent runs Corral's own loop ('builtin') or an agent
-- CLI in its sandbox; a run records which drove it ('' is the built-in
-- loop, 'terminal' a person at its terminal) and, for a CLI, the hash of
-- its token: the CLI's only credential at the gateway, good while the run
-- is active.

-- +goose Up
ALTER TABLE agents ADD COLUMN driver TEXT NOT NULL DEFAULT 'builtin'
    CHECK (driver IN ('builtin', 'codex', 'claude-code', 'opencode'));
-- SQLite cannot change a column's CHECK in place; a new column can be
-- swapped in (its CHECK goes with the old column).
ALTER TABLE runs ADD COLUMN driver_v13 TEXT NOT NULL DEFAULT ''
    CHECK (driver_v13 IN ('', 'terminal', 'codex', 'claude-code', 'opencode'));
UPDATE runs SET driver_v13 = driver;
ALTER TABLE runs DROP COLUMN driver;
ALTER TABLE runs RENAME COLUMN driver_v13 TO driver;
ALTER TABLE runs ADD COLUMN token_hash BLOB;
CREATE UNIQUE INDEX runs_token_hash ON runs(token_hash) WHERE token_hash IS NOT NULL;

-- +goose Down
DROP INDEX runs_token_hash;
ALTER TABLE runs DROP COLUMN token_hash;
ALTER TABLE runs ADD COLUMN driver_v11 TEXT NOT NULL DEFAULT '' CHECK (driver_v11 IN ('', 'terminal'));
UPDATE runs SET driver_v11 = CASE WHEN driver = 'terminal' THEN 'terminal' ELSE '' END;
ALTER TABLE runs DROP COLUMN driver;
ALTER TABLE runs RENAME COLUMN driver_v11 TO driver;
ALTER TABLE agents DROP COLUMN driver;
