-- Credentials bound to repositories: the patterns (host/path, JSON array
-- of strings) of the repository URLs a credential may be used for, set by
-- its owner. Existing credentials get none: they are used for nothing
-- until their owner says for what (fail closed).

-- +goose Up
ALTER TABLE credentials ADD COLUMN repositories TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE credentials DROP COLUMN repositories;
