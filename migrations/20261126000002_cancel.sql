-- A run can be cancelled from any instance: the one asked records the request, the one that
-- drives the run (told by a notification, or at its next heartbeat) cancels it. A new segment of
-- the run (a resume under its id) starts without it.

ALTER TABLE runs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
