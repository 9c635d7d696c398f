-- What a server's secret key sealed, to find out whether another
-- server's key is the same (controls sharing a store need one key).

-- +goose Up
CREATE TABLE key_checks (
    name   TEXT COLLATE "C" PRIMARY KEY,
    sealed BYTEA NOT NULL
);

-- +goose Down
DROP TABLE key_checks;
