-- What a principal may do holds across instances: its running runs, the runs it began in the
-- last minute and the bytes its runs of the day logged are read from the runs themselves.
ALTER TABLE runs ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
CREATE INDEX runs_live_by_principal ON runs (principal) WHERE status = 'running';
