-- A run driven by one instance may be followed from another (a reloaded page re-joining through
-- another instance): the follower's instance records until when it follows the run, renewed at
-- its heartbeat, so that the driving instance does not cancel the run as abandoned.

ALTER TABLE runs ADD COLUMN followed_until BIGINT NOT NULL DEFAULT 0;
