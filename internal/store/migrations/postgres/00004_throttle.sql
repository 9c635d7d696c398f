-- The login throttles' records, kept in the store when servers share it,
-- so that every server counts the same failures and a takeover forgets
-- none. key_hash is a keyed HMAC-SHA-256, in hex, of the throttle's name and the
-- key, which holds an email or a client address; times are unix
-- milliseconds; fails is the last hour's failure times, big-endian
-- int64s, oldest first.

-- +goose Up
CREATE TABLE throttle_entries (
    key_hash     TEXT COLLATE "C" PRIMARY KEY,
    streak       BIGINT NOT NULL,
    locked_until BIGINT NOT NULL,
    last_fail    BIGINT NOT NULL,
    last_active  BIGINT NOT NULL,
    fails        BYTEA NOT NULL
);

-- The sweep of stale entries reads them oldest failure first.
CREATE INDEX throttle_entries_last_fail ON throttle_entries (last_fail);

-- +goose Down
DROP TABLE throttle_entries;
