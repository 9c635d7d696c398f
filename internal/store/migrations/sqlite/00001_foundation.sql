-- The foundation: accounts, sessions, API tokens, invites, agents, their
-- sharing (grants, links) and their threads.
--
-- Times are INTEGER unix milliseconds UTC; booleans are INTEGER 0/1; levels
-- are their names. Tables are STRICT so a value of the wrong type is an
-- error instead of being stored as whatever it happens to be.

-- +goose Up
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    admin         INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
    disabled      INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_user_id ON sessions(user_id);
CREATE INDEX sessions_expires_at ON sessions(expires_at);

CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    token_hash   BLOB NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
) STRICT;
CREATE INDEX api_tokens_user_id ON api_tokens(user_id);

CREATE TABLE invites (
    id         TEXT PRIMARY KEY,
    created_by TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_by    TEXT REFERENCES users(id) ON DELETE SET NULL,
    used_at    INTEGER
) STRICT;
CREATE INDEX invites_created_by ON invites(created_by);
CREATE INDEX invites_used_by ON invites(used_by);

CREATE TABLE agents (
    id               TEXT PRIMARY KEY,
    owner_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    instructions     TEXT NOT NULL DEFAULT '',
    model            TEXT NOT NULL DEFAULT '',
    fs               TEXT NOT NULL CHECK (fs IN ('read-only', 'read-write')),
    changes          TEXT NOT NULL CHECK (changes IN ('review', 'auto')),
    network          TEXT NOT NULL CHECK (network IN ('none')),
    max_prompt_bytes INTEGER NOT NULL DEFAULT 0 CHECK (max_prompt_bytes >= 0),
    max_runs         INTEGER NOT NULL DEFAULT 0 CHECK (max_runs >= 0),
    run_timeout_s    INTEGER NOT NULL DEFAULT 0 CHECK (run_timeout_s >= 0),
    cpu_millis       INTEGER NOT NULL DEFAULT 0 CHECK (cpu_millis >= 0),
    memory_bytes     INTEGER NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    pids             INTEGER NOT NULL DEFAULT 0 CHECK (pids >= 0),
    output_bytes     INTEGER NOT NULL DEFAULT 0 CHECK (output_bytes >= 0),
    budget_tokens    INTEGER NOT NULL DEFAULT 0 CHECK (budget_tokens >= 0),
    budget_used      INTEGER NOT NULL DEFAULT 0 CHECK (budget_used >= 0),
    state            TEXT NOT NULL CHECK (state IN ('active', 'paused', 'quarantined')),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX agents_owner_id ON agents(owner_id);

CREATE TABLE grants (
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    level      TEXT NOT NULL CHECK (level IN ('viewer', 'runner', 'editor')),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, user_id)
) STRICT;
CREATE INDEX grants_user_id ON grants(user_id);

CREATE TABLE links (
    id         TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    level      TEXT NOT NULL CHECK (level IN ('viewer', 'runner')),
    token_hash BLOB NOT NULL UNIQUE,
    created_by TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX links_agent_id ON links(agent_id);
CREATE INDEX links_created_by ON links(created_by);

CREATE TABLE link_members (
    link_id   TEXT NOT NULL REFERENCES links(id) ON DELETE CASCADE,
    user_id   TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    joined_at INTEGER NOT NULL,
    PRIMARY KEY (link_id, user_id)
) STRICT;
CREATE INDEX link_members_user_id ON link_members(user_id);

CREATE TABLE messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    agent_id   TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    author_id  TEXT REFERENCES users(id) ON DELETE SET NULL,
    run_id     TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX messages_agent_seq ON messages(agent_id, seq);
CREATE INDEX messages_author_id ON messages(author_id);

-- +goose Down
DROP TABLE messages;
DROP TABLE link_members;
DROP TABLE links;
DROP TABLE grants;
DROP TABLE agents;
DROP TABLE invites;
DROP TABLE api_tokens;
DROP TABLE sessions;
DROP TABLE users;
