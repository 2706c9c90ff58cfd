-- The run log as the spine: instances renew ownership of all their runs with one heartbeat
-- (not a write per run), and runs keep what identifies their request (the same request replays
-- the run), where their latest segment starts (a resume under the same run id continues it), what
-- a retry needs (runs that apply decisions) and how many times they were started.

CREATE TABLE instances (
    owner TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);

ALTER TABLE runs ADD COLUMN request_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN request TEXT;
ALTER TABLE runs ADD COLUMN segment_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempts BIGINT NOT NULL DEFAULT 1;

CREATE INDEX interrupts_by_resolver ON interrupts (resolved_by_run);
