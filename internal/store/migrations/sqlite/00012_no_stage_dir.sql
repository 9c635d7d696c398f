-- A change set's staged tree is named by its id (stages/<id> under the
-- data directory of whichever machine holds it): the store keeps ids, not
-- host paths.

-- +goose Up
ALTER TABLE change_sets DROP COLUMN stage_dir;

-- +goose Down
ALTER TABLE change_sets ADD COLUMN stage_dir TEXT NOT NULL DEFAULT '';
