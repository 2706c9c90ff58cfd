-- A run's events in chunks: one row per write of consecutive events (their JSON joined by
-- newlines) instead of one row per event. The events logged so far become chunks of one.

CREATE TABLE run_chunks (
    run_id TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);

INSERT INTO run_chunks (run_id, first_seq, last_seq, events)
    SELECT run_id, seq, seq, event FROM run_events;

DROP TABLE run_events;
