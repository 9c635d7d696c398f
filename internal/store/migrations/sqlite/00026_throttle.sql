-- The login throttles' records, kept in the store when servers share it
-- (on PostgreSQL), so that every server counts the same failures and a
-- takeover forgets none. key_hash is a keyed HMAC-SHA-256, in hex, of the
-- throttle's name and the key, which holds an email or a client address;
-- times are unix milliseconds; fails is the last hour's failure times,
-- big-endian int64s, oldest first.

-- +goose Up
CREATE TABLE throttle_entries (
    key_hash     TEXT PRIMARY KEY,
    streak       INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,
    last_fail    INTEGER NOT NULL,
    last_active  INTEGER NOT NULL,
    fails        BLOB NOT NULL
) STRICT;

-- The sweep of stale entries reads them oldest failure first.
CREATE INDEX throttle_entries_last_fail ON throttle_entries (last_fail);

-- +goose Down
DROP TABLE throttle_entries;
