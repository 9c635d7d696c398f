-- Code-host credentials (a token for a git host), one person's each. The
-- secret is sealed by internal/secrets with a key kept outside this file:
-- the database alone never holds it in the clear. The sealed value is bound
-- to its row (id, owner, host), so one copied into another row does not
-- open.

-- +goose Up
CREATE TABLE credentials (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    host       TEXT NOT NULL,
    username   TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (user_id, name)
) STRICT;
-- The push's lookup: an owner's credentials for one host, newest first.
CREATE INDEX credentials_user_host ON credentials(user_id, host, created_at);

-- +goose Down
DROP TABLE credentials;
