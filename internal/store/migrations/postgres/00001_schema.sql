-- The whole schema of migrations/sqlite up to 00023, for PostgreSQL:
-- the same tables, columns, constraints and append-only triggers.
-- Integers are BIGINT (SQLite's are 64-bit), blobs BYTEA, and each
-- AUTOINCREMENT key an identity. Text compares and sorts bytewise
-- (COLLATE "C") as SQLite's does, whatever the database's locale.

-- +goose Up
CREATE TABLE users (
    id            TEXT COLLATE "C" PRIMARY KEY,
    email         TEXT COLLATE "C" NOT NULL UNIQUE,
    name          TEXT COLLATE "C" NOT NULL,
    password_hash TEXT COLLATE "C" NOT NULL,
    admin         BIGINT NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
    disabled      BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at    BIGINT NOT NULL
);

CREATE TABLE sessions (
    id         TEXT COLLATE "C" PRIMARY KEY,
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id           TEXT COLLATE "C" PRIMARY KEY,
    user_id      TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT COLLATE "C" NOT NULL,
    token_hash   BYTEA NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT
);

CREATE TABLE invites (
    id         TEXT COLLATE "C" PRIMARY KEY,
    created_by TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_by    TEXT COLLATE "C" REFERENCES users(id) ON DELETE SET NULL,
    used_at    BIGINT
);

CREATE TABLE nodes (
    id TEXT COLLATE "C" PRIMARY KEY,
    name TEXT COLLATE "C" NOT NULL,
    draining BIGINT NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
    last_seen_at BIGINT,
    created_at BIGINT NOT NULL
);

CREATE TABLE agents (
    id               TEXT COLLATE "C" PRIMARY KEY,
    owner_id         TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT COLLATE "C" NOT NULL,
    instructions     TEXT COLLATE "C" NOT NULL DEFAULT '',
    model            TEXT COLLATE "C" NOT NULL DEFAULT '',
    fs               TEXT COLLATE "C" NOT NULL CHECK (fs IN ('read-only', 'read-write')),
    changes          TEXT COLLATE "C" NOT NULL CHECK (changes IN ('review', 'auto')),
    max_prompt_bytes BIGINT NOT NULL DEFAULT 0 CHECK (max_prompt_bytes >= 0),
    max_runs         BIGINT NOT NULL DEFAULT 0 CHECK (max_runs >= 0),
    run_timeout_s    BIGINT NOT NULL DEFAULT 0 CHECK (run_timeout_s >= 0),
    cpu_millis       BIGINT NOT NULL DEFAULT 0 CHECK (cpu_millis >= 0),
    memory_bytes     BIGINT NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    pids             BIGINT NOT NULL DEFAULT 0 CHECK (pids >= 0),
    output_bytes     BIGINT NOT NULL DEFAULT 0 CHECK (output_bytes >= 0),
    budget_tokens    BIGINT NOT NULL DEFAULT 0 CHECK (budget_tokens >= 0),
    budget_used      BIGINT NOT NULL DEFAULT 0 CHECK (budget_used >= 0),
    state            TEXT COLLATE "C" NOT NULL CHECK (state IN ('active', 'paused', 'quarantined')),
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
, globs TEXT COLLATE "C" NOT NULL DEFAULT '{}', disk_bytes BIGINT NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0), disk_inodes BIGINT NOT NULL DEFAULT 0 CHECK (disk_inodes >= 0), pending_disk_bytes BIGINT NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0), driver TEXT COLLATE "C" NOT NULL DEFAULT 'builtin'
    CHECK (driver IN ('builtin', 'codex', 'claude-code', 'opencode')), created_by_run TEXT COLLATE "C" NOT NULL DEFAULT '', node_id TEXT COLLATE "C" REFERENCES nodes(id) ON DELETE SET NULL, budget_reserved BIGINT NOT NULL DEFAULT 0 CHECK (budget_reserved >= 0), library BIGINT NOT NULL DEFAULT 0 CHECK (library IN (0, 1)), network TEXT COLLATE "C" NOT NULL DEFAULT 'none' CHECK (network IN ('none', 'allowlist')));

CREATE TABLE grants (
    agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    level      TEXT COLLATE "C" NOT NULL CHECK (level IN ('viewer', 'runner', 'editor')),
    created_at BIGINT NOT NULL, accepted BIGINT NOT NULL DEFAULT 0 CHECK (accepted IN (0, 1)),
    PRIMARY KEY (agent_id, user_id)
);

CREATE TABLE links (
    id         TEXT COLLATE "C" PRIMARY KEY,
    agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    level      TEXT COLLATE "C" NOT NULL CHECK (level IN ('viewer', 'runner')),
    token_hash BYTEA NOT NULL UNIQUE,
    created_by TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL
);

CREATE TABLE link_members (
    link_id   TEXT COLLATE "C" NOT NULL REFERENCES links(id) ON DELETE CASCADE,
    user_id   TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (link_id, user_id)
);

CREATE TABLE messages (
    seq        BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id         TEXT COLLATE "C" NOT NULL UNIQUE,
    agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    role       TEXT COLLATE "C" NOT NULL,
    content    TEXT COLLATE "C" NOT NULL,
    author_id  TEXT COLLATE "C" REFERENCES users(id) ON DELETE SET NULL,
    run_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
, sources TEXT COLLATE "C");

CREATE TABLE change_sets (
    id         TEXT COLLATE "C" PRIMARY KEY,
    agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    run_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
    status     TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'applied', 'rejected', 'denied', 'conflicted', 'expired', 'failed')),
    mode       TEXT COLLATE "C" NOT NULL CHECK (mode IN ('review', 'auto')),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    decided_by TEXT COLLATE "C" REFERENCES users(id) ON DELETE SET NULL,
    decided_at BIGINT
, disk_bytes BIGINT NOT NULL DEFAULT 0 CHECK (disk_bytes >= 0));

CREATE TABLE trace_events (
    run_id    TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL CHECK (seq >= 1),
    at        TEXT COLLATE "C" NOT NULL,
    type      TEXT COLLATE "C" NOT NULL,
    data      TEXT COLLATE "C" NOT NULL,
    prev_hash TEXT COLLATE "C" NOT NULL,
    hash      TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE runs (
    seq           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id            TEXT COLLATE "C" NOT NULL UNIQUE,
    agent_id      TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    status        TEXT COLLATE "C" NOT NULL CHECK (status IN ('admitted', 'running', 'paused',
                      'completed', 'cancelled', 'killed', 'errored', 'reconciled')),
    triggered_by  TEXT COLLATE "C" REFERENCES users(id) ON DELETE SET NULL,
    parent_run_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    message_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    stage_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
    change_set_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    tokens_input  BIGINT NOT NULL DEFAULT 0 CHECK (tokens_input >= 0),
    tokens_output BIGINT NOT NULL DEFAULT 0 CHECK (tokens_output >= 0),
    reason        TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    started_at    BIGINT,
    ended_at      BIGINT,
    -- Last, so that reading the columns before it never loads a large
    -- checkpoint's overflow pages.
    checkpoint    BYTEA
, driver TEXT COLLATE "C" NOT NULL DEFAULT ''
    CHECK (driver IN ('', 'terminal', 'codex', 'claude-code', 'opencode')), token_hash BYTEA, root_run_id TEXT COLLATE "C" NOT NULL DEFAULT '', depth BIGINT NOT NULL DEFAULT 0 CHECK (depth >= 0), parent_call TEXT COLLATE "C" NOT NULL DEFAULT '', node_id TEXT COLLATE "C" NOT NULL DEFAULT '', violation TEXT COLLATE "C" NOT NULL DEFAULT ''
    CHECK (violation IN ('', 'timeout', 'memory', 'pids', 'cpu', 'output', 'disk', 'egress')));

-- A path, its note and its diff are the bytes a run wrote, which need not
-- be UTF-8 (a file named in Latin-1, a diff of one): BYTEA, which holds
-- them as SQLite's TEXT does and sorts them bytewise as it does.
CREATE TABLE change_entries (
    change_set_id TEXT COLLATE "C" NOT NULL REFERENCES change_sets(id) ON DELETE CASCADE,
    path          BYTEA NOT NULL,
    op            TEXT COLLATE "C" NOT NULL CHECK (op IN ('create', 'modify', 'delete')),
    old_sha256    TEXT COLLATE "C" NOT NULL,
    new_sha256    TEXT COLLATE "C" NOT NULL,
    size          BIGINT NOT NULL CHECK (size >= 0),
    mode          BIGINT NOT NULL,
    old_mode      BIGINT NOT NULL,
    class         TEXT COLLATE "C" NOT NULL CHECK (class IN ('ordinary', 'risky', 'protected')),
    flags         TEXT COLLATE "C" NOT NULL,
    state         TEXT COLLATE "C" NOT NULL CHECK (state IN ('pending', 'applied', 'rejected', 'denied', 'conflicted', 'dropped')),
    note          BYTEA NOT NULL DEFAULT '',
    -- Last: lists read the columns before it and never load a large diff.
    diff          BYTEA NOT NULL DEFAULT '',
    PRIMARY KEY (change_set_id, path)
);

CREATE TABLE credentials (
    id         TEXT COLLATE "C" PRIMARY KEY,
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT COLLATE "C" NOT NULL,
    host       TEXT COLLATE "C" NOT NULL,
    username   TEXT COLLATE "C" NOT NULL,
    sealed     BYTEA NOT NULL,
    created_at BIGINT NOT NULL, repositories TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    UNIQUE (user_id, name)
);

CREATE TABLE repositories (
    agent_id      TEXT COLLATE "C" PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    url           TEXT COLLATE "C" NOT NULL,
    ref           TEXT COLLATE "C" NOT NULL DEFAULT '',
    credential_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    head          TEXT COLLATE "C" NOT NULL DEFAULT '',
    status        TEXT COLLATE "C" NOT NULL CHECK (status IN ('cloning', 'ready', 'failed')),
    error         TEXT COLLATE "C" NOT NULL DEFAULT '',
    pending       TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    created_by    TEXT COLLATE "C" NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    push_branch   TEXT COLLATE "C" NOT NULL DEFAULT '',
    push_head     TEXT COLLATE "C" NOT NULL DEFAULT '',
    push_at       BIGINT,
    push_by       TEXT COLLATE "C" NOT NULL DEFAULT '',
    push_by_name  TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE TABLE node_join_tokens (
    token_hash BYTEA PRIMARY KEY,
    expires_at BIGINT NOT NULL,
    used_by TEXT COLLATE "C" REFERENCES nodes(id) ON DELETE SET NULL,
    used_at BIGINT
);

CREATE TABLE node_credentials (
    credential_hash BYTEA PRIMARY KEY,
    node_id TEXT COLLATE "C" NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    expires_at BIGINT NOT NULL
);

CREATE TABLE reservations (
    id TEXT COLLATE "C" PRIMARY KEY,
    agent_id TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    run_id TEXT COLLATE "C" REFERENCES runs(id) ON DELETE CASCADE,
    tokens BIGINT NOT NULL CHECK (tokens > 0),
    created_at BIGINT NOT NULL
, model TEXT COLLATE "C" NOT NULL DEFAULT '', user_id TEXT COLLATE "C" NOT NULL DEFAULT '');

CREATE TABLE admissions (
    seq                       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id                        TEXT COLLATE "C" NOT NULL UNIQUE,
    agent_id                  TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    user_id                   TEXT COLLATE "C" REFERENCES users(id) ON DELETE SET NULL,
    run_id                    TEXT COLLATE "C" NOT NULL DEFAULT '',
    reason                    TEXT COLLATE "C" NOT NULL DEFAULT '' CHECK (reason IN ('', 'quarantined', 'paused',
                                  'prompt_too_large', 'budget_exhausted', 'disk_quota',
                                  'pending_disk_user', 'pending_disk_server', 'run_limit', 'busy',
                                  'delegation_depth', 'delegation_fanout', 'delegation_concurrency')),
    prompt_bytes              BIGINT NOT NULL CHECK (prompt_bytes >= 0),
    runs_admitted             BIGINT NOT NULL CHECK (runs_admitted >= 0),
    active_runs               BIGINT NOT NULL CHECK (active_runs >= 0),
    tokens_used               BIGINT NOT NULL CHECK (tokens_used >= 0),
    tokens_budget             BIGINT NOT NULL CHECK (tokens_budget >= 0),
    agent_state               TEXT COLLATE "C" NOT NULL CHECK (agent_state IN ('active', 'paused', 'quarantined')),
    at                        BIGINT NOT NULL,
    pending_disk_bytes        BIGINT NOT NULL DEFAULT 0 CHECK (pending_disk_bytes >= 0),
    owner_pending_disk_bytes  BIGINT NOT NULL DEFAULT 0 CHECK (owner_pending_disk_bytes >= 0),
    server_pending_disk_bytes BIGINT NOT NULL DEFAULT 0 CHECK (server_pending_disk_bytes >= 0),
    CHECK ((reason = '') = (run_id != ''))
);

CREATE TABLE agent_secrets (
    id         TEXT COLLATE "C" PRIMARY KEY,
    agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name       TEXT COLLATE "C" NOT NULL,
    host       TEXT COLLATE "C" NOT NULL,
    header     TEXT COLLATE "C" NOT NULL,
    sealed     BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (agent_id, name)
);

CREATE TABLE usage (
    seq      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at       BIGINT NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    owner_id TEXT COLLATE "C" NOT NULL,
    user_id  TEXT COLLATE "C" NOT NULL,
    run_id   TEXT COLLATE "C" NOT NULL,
    model    TEXT COLLATE "C" NOT NULL,
    input    BIGINT NOT NULL CHECK (input >= 0),
    output   BIGINT NOT NULL CHECK (output >= 0)
);

CREATE TABLE account_events (
    seq      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at       BIGINT NOT NULL,
    type     TEXT COLLATE "C" NOT NULL,
    actor_id TEXT COLLATE "C" NOT NULL,
    user_id  TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    object   TEXT COLLATE "C" NOT NULL,
    detail   TEXT COLLATE "C" NOT NULL
);

CREATE TABLE audit (
    seq       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id    TEXT COLLATE "C",
    trace_seq BIGINT,
    account   BIGINT REFERENCES account_events(seq),
    CHECK ((run_id IS NOT NULL AND trace_seq IS NOT NULL) <> (account IS NOT NULL))
);

CREATE INDEX sessions_user_id ON sessions(user_id);
CREATE INDEX sessions_expires_at ON sessions(expires_at);
CREATE INDEX api_tokens_user_id ON api_tokens(user_id);
CREATE INDEX invites_created_by ON invites(created_by);
CREATE INDEX invites_used_by ON invites(used_by);
CREATE INDEX agents_owner_id ON agents(owner_id);
CREATE INDEX grants_user_id ON grants(user_id);
CREATE INDEX links_agent_id ON links(agent_id);
CREATE INDEX links_created_by ON links(created_by);
CREATE INDEX link_members_user_id ON link_members(user_id);
CREATE INDEX messages_agent_seq ON messages(agent_id, seq);
CREATE INDEX messages_author_id ON messages(author_id);
CREATE INDEX change_sets_agent ON change_sets(agent_id, created_at);
CREATE INDEX change_sets_pending ON change_sets(status) WHERE status = 'pending';
CREATE INDEX runs_agent_seq ON runs(agent_id, seq);
CREATE INDEX runs_status_seq ON runs(status, seq);
CREATE INDEX runs_triggered_by ON runs(triggered_by);
CREATE INDEX credentials_user_host ON credentials(user_id, host, created_at);
CREATE UNIQUE INDEX runs_token_hash ON runs(token_hash) WHERE token_hash IS NOT NULL;
CREATE INDEX runs_root ON runs(root_run_id);
CREATE UNIQUE INDEX runs_parent_call ON runs(parent_run_id, parent_call) WHERE parent_run_id != '';
CREATE INDEX agents_created_by_run ON agents(created_by_run) WHERE created_by_run != '';
CREATE INDEX node_credentials_node ON node_credentials(node_id);
CREATE INDEX reservations_agent ON reservations(agent_id);
CREATE INDEX reservations_run ON reservations(run_id);
CREATE INDEX change_sets_pending_disk ON change_sets(agent_id, disk_bytes) WHERE status = 'pending';
CREATE INDEX admissions_agent_seq ON admissions(agent_id, seq);
CREATE INDEX admissions_user_id ON admissions(user_id);
CREATE INDEX runs_agent_violations ON runs(agent_id, ended_at) WHERE violation != '';
CREATE INDEX usage_at ON usage(at);
CREATE INDEX usage_owner_at ON usage(owner_id, at);

-- +goose StatementBegin
CREATE FUNCTION corral_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION corral_trace_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    prev TEXT;
BEGIN
    IF NEW.seq = 1 THEN
        prev := '';
    ELSE
        SELECT hash INTO prev FROM trace_events WHERE run_id = NEW.run_id AND seq = NEW.seq - 1;
    END IF;
    IF prev IS NULL OR NEW.prev_hash IS DISTINCT FROM prev THEN
        RAISE EXCEPTION 'trace event does not continue its chain' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION corral_audit_trace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit (run_id, trace_seq) VALUES (NEW.run_id, NEW.seq);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION corral_audit_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit (account) VALUES (NEW.seq);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER trace_events_chain BEFORE INSERT ON trace_events
    FOR EACH ROW EXECUTE FUNCTION corral_trace_chain();
CREATE TRIGGER trace_events_audit AFTER INSERT ON trace_events
    FOR EACH ROW EXECUTE FUNCTION corral_audit_trace();
CREATE TRIGGER account_events_audit AFTER INSERT ON account_events
    FOR EACH ROW EXECUTE FUNCTION corral_audit_account();

-- Append-only, row by row and against TRUNCATE, which row triggers do
-- not see.
CREATE TRIGGER trace_events_no_change BEFORE UPDATE OR DELETE ON trace_events
    FOR EACH ROW EXECUTE FUNCTION corral_append_only('trace events are append-only');
CREATE TRIGGER trace_events_no_truncate BEFORE TRUNCATE ON trace_events
    FOR EACH STATEMENT EXECUTE FUNCTION corral_append_only('trace events are append-only');
CREATE TRIGGER account_events_no_change BEFORE UPDATE OR DELETE ON account_events
    FOR EACH ROW EXECUTE FUNCTION corral_append_only('account events are append-only');
CREATE TRIGGER account_events_no_truncate BEFORE TRUNCATE ON account_events
    FOR EACH STATEMENT EXECUTE FUNCTION corral_append_only('account events are append-only');
CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION corral_append_only('the audit log is append-only');
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION corral_append_only('the audit log is append-only');
