-- Documents' copies: when controls share a store (on PostgreSQL), every
-- indexed document's passages and vectors are kept here too, so that a
-- control that takes over rebuilds its own search indexes (DATA/documents,
-- derived data) from them, without the provider, and loses none. owner is
-- "library" or the agent's id; created_at is unix milliseconds; a vector
-- is little-endian float32s, NULL when the document was not embedded.

-- +goose Up
CREATE TABLE document_copies (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    bytes       INTEGER NOT NULL,
    author_id   TEXT NOT NULL,
    author_name TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX document_copies_owner ON document_copies (owner);

CREATE TABLE document_chunk_copies (
    document_id TEXT NOT NULL REFERENCES document_copies (id) ON DELETE CASCADE,
    ord         INTEGER NOT NULL,
    heading     TEXT NOT NULL,
    text        TEXT NOT NULL,
    vector      BLOB,
    PRIMARY KEY (document_id, ord)
) STRICT;

-- +goose Down
DROP TABLE document_chunk_copies;
DROP TABLE document_copies;
