-- What every server sharing a store must hold alike, kept by the first:
-- a value sealed with its secret key (another server must open it, or
-- its key is not the same), the egress CA (its key sealed).

-- +goose Up
CREATE TABLE shared_keys (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

-- +goose Down
DROP TABLE shared_keys;
