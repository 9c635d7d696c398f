-- What drives a run: '' for the built-in agent loop, 'terminal' for a
-- person at its terminal (a run with no model and no message).

-- +goose Up
ALTER TABLE runs ADD COLUMN driver TEXT NOT NULL DEFAULT '' CHECK (driver IN ('', 'terminal'));

-- +goose Down
ALTER TABLE runs DROP COLUMN driver;
