-- What model steps spent, each step once (by its run and turn), so that budgets hold across
-- instances and restarts: summed by the run a step is billed to (a sub-agent's steps are its
-- top-level run's) and by principal ('' for runs of no principal) and day (UTC, days since
-- 1970-01-01). Deleting a thread leaves its spending: it was spent.
CREATE TABLE spending (
    run_id TEXT NOT NULL,
    turn BIGINT NOT NULL,
    billed_run TEXT NOT NULL,
    principal TEXT NOT NULL,
    day BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    nano_usd BIGINT NOT NULL,
    PRIMARY KEY (run_id, turn)
);
CREATE INDEX spending_by_run ON spending (billed_run);
CREATE INDEX spending_by_day ON spending (principal, day);
