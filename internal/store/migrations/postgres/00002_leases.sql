-- Leases: what one server of several sharing a store holds for a while
-- and renews (the control lease: which control serves).

-- +goose Up
CREATE TABLE leases (
    name       TEXT COLLATE "C" PRIMARY KEY,
    holder     TEXT COLLATE "C" NOT NULL,
    expires_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE leases;
