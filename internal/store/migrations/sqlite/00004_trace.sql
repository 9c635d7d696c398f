-- Runs' traces: append-only and hash-chained. The triggers make the store
-- itself refuse to change or remove an event, and refuse an event that
-- does not continue its run's chain.

-- +goose Up
CREATE TABLE trace_events (
    run_id    TEXT NOT NULL,
    seq       INTEGER NOT NULL CHECK (seq >= 1),
    at        TEXT NOT NULL,
    type      TEXT NOT NULL,
    data      TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;

-- +goose StatementBegin
CREATE TRIGGER trace_events_no_update BEFORE UPDATE ON trace_events
BEGIN
    SELECT RAISE(ABORT, 'trace events are append-only');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER trace_events_no_delete BEFORE DELETE ON trace_events
BEGIN
    SELECT RAISE(ABORT, 'trace events are append-only');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER trace_events_chain BEFORE INSERT ON trace_events
WHEN NEW.prev_hash IS NOT coalesce(
        (SELECT hash FROM trace_events WHERE run_id = NEW.run_id AND seq = NEW.seq - 1),
        CASE WHEN NEW.seq = 1 THEN '' END)
BEGIN
    SELECT RAISE(ABORT, 'trace event does not continue its chain');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE trace_events;
