-- Usage and audit.
--
-- usage: one row per settled model call that spent tokens, written in the
-- transaction that settles its reservation, so it always agrees with the
-- agents' budget.used and the runs' token counts. It keeps what the call
-- was (agent, run, model) and whose it was (the agent's owner and the
-- person the call was made for) as they were then, with no reference to
-- the agent or the run: spend outlives a deleted agent. A reservation now
-- keeps the model and the person, for its settlement to copy.
--
-- account_events: what happened to accounts and access (signup, login,
-- logout, disable, invites, tokens, grants, links, credentials, secrets),
-- written in the transaction of the change it tells of. Append-only like
-- trace_events. Ids and levels only: no column could hold a token, a hash
-- or a secret value.
--
-- audit: the one order of trace events and account events. Its seq is
-- AUTOINCREMENT, so it is never reused, and every write transaction of
-- the database is serial (one writer, BEGIN IMMEDIATE, SQLite's write
-- lock across processes): a row's seq is larger than that of every row
-- committed before it, and a reader that has seen seq N has seen every
-- row below N. A cursor "after N" therefore misses nothing and repeats
-- nothing. The triggers fill it for every insert of either table, by any
-- path; trace events stored before this migration enter it in the order
-- they were inserted (their rowid: trace events are never deleted).

-- +goose Up
ALTER TABLE reservations ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE reservations ADD COLUMN user_id TEXT NOT NULL DEFAULT '';

CREATE TABLE usage (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    model    TEXT NOT NULL,
    input    INTEGER NOT NULL CHECK (input >= 0),
    output   INTEGER NOT NULL CHECK (output >= 0)
) STRICT;
CREATE INDEX usage_at ON usage(at);
CREATE INDEX usage_owner_at ON usage(owner_id, at);

CREATE TABLE account_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    type     TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    object   TEXT NOT NULL,
    detail   TEXT NOT NULL
) STRICT;

CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id    TEXT,
    trace_seq INTEGER,
    account   INTEGER REFERENCES account_events(seq),
    CHECK ((run_id IS NOT NULL AND trace_seq IS NOT NULL) <> (account IS NOT NULL))
) STRICT;

INSERT INTO audit (run_id, trace_seq) SELECT run_id, seq FROM trace_events ORDER BY rowid;

-- +goose StatementBegin
CREATE TRIGGER trace_events_audit AFTER INSERT ON trace_events
BEGIN
    INSERT INTO audit (run_id, trace_seq) VALUES (NEW.run_id, NEW.seq);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER account_events_audit AFTER INSERT ON account_events
BEGIN
    INSERT INTO audit (account) VALUES (NEW.seq);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER account_events_no_update BEFORE UPDATE ON account_events
BEGIN
    SELECT RAISE(ABORT, 'account events are append-only');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER account_events_no_delete BEFORE DELETE ON account_events
BEGIN
    SELECT RAISE(ABORT, 'account events are append-only');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER trace_events_audit;
DROP TABLE audit;
DROP TABLE account_events;
DROP TABLE usage;
ALTER TABLE reservations DROP COLUMN user_id;
ALTER TABLE reservations DROP COLUMN model;
