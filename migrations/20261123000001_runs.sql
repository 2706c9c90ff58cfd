-- Threads, runs, their event logs and pending interrupts. Portable SQL: the same migration runs
-- on SQLite and PostgreSQL. Times are Unix milliseconds; JSON is stored as text.

CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY,
    messages TEXT NOT NULL,
    state TEXT,
    updated_at BIGINT NOT NULL
);

CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_expires_at BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- One active run per thread, enforced by the database whichever instance starts it.
CREATE UNIQUE INDEX runs_one_active_per_thread ON runs (thread_id) WHERE status = 'running';
CREATE INDEX runs_by_thread ON runs (thread_id, created_at);
CREATE INDEX runs_by_lease ON runs (status, lease_expires_at);

CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE interrupts (
    interrupt_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    status TEXT NOT NULL,
    resolution TEXT,
    resolved_by_run TEXT,
    resolved_at BIGINT
);

CREATE INDEX interrupts_by_thread ON interrupts (thread_id, status);
CREATE INDEX interrupts_by_status ON interrupts (status, created_at);
