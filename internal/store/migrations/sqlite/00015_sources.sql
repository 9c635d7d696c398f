-- Retrieval: an answer that drew on documents keeps which ones (JSON:
-- document id, name, store, score, confidence), so the thread can show
-- its sources. The documents themselves are not here: they live in their
-- own stores (internal/retrieval), apart from this database.

-- +goose Up
ALTER TABLE messages ADD COLUMN sources TEXT;

-- +goose Down
ALTER TABLE messages DROP COLUMN sources;
