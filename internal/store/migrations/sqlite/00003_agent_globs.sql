-- Per-agent globs over workspace paths: secrets left out of staged trees,
-- protected and risky changes. JSON: {"secrets":[...],"protected":[...],"risky":[...]}.

-- +goose Up
ALTER TABLE agents ADD COLUMN globs TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE agents DROP COLUMN globs;
