-- What runs' ends tell beyond their followers (a webhook's messages), kept in the transaction of
-- the end and delivered at least once: `pending` until delivered or given up (`failed`), due at
-- `next_at`, held by the instance attempting it until `held_until` (ms since the epoch), each
-- attempt counted in `attempts`.
CREATE TABLE notices (
    notice_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    url TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_at BIGINT NOT NULL,
    held_until BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    last_error TEXT
);
CREATE INDEX notices_due ON notices (next_at) WHERE status = 'pending';
CREATE INDEX notices_by_run ON notices (run_id);
CREATE INDEX notices_by_time ON notices (created_at);
