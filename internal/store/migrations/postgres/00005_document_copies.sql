-- Documents' copies: when controls share the store, every indexed
-- document's passages and vectors are kept here too, so that a control
-- that takes over rebuilds its own search indexes (DATA/documents, derived
-- data) from them, without the provider, and loses none. owner is
-- "library" or the agent's id; created_at is unix milliseconds; a vector
-- is little-endian float32s, NULL when the document was not embedded.

-- +goose Up
CREATE TABLE document_copies (
    id          TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    bytes       BIGINT NOT NULL,
    author_id   TEXT COLLATE "C" NOT NULL,
    author_name TEXT COLLATE "C" NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE INDEX document_copies_owner ON document_copies (owner);

CREATE TABLE document_chunk_copies (
    document_id TEXT COLLATE "C" NOT NULL REFERENCES document_copies (id) ON DELETE CASCADE,
    ord         BIGINT NOT NULL,
    heading     TEXT COLLATE "C" NOT NULL,
    text        TEXT COLLATE "C" NOT NULL,
    vector      BYTEA,
    PRIMARY KEY (document_id, ord)
);

-- +goose Down
DROP TABLE document_chunk_copies;
DROP TABLE document_copies;
