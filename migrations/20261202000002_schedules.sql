-- Schedules: what each says (`spec`, its scheduler's JSON), when its next occurrence falls
-- (`next_at`, ms since the epoch; NULL when it has none left), and the last occurrence taken
-- with the run begun for it. An instance takes an occurrence by moving `next_at` on from the
-- time it read: of the instances that read it, one does.
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    next_at BIGINT,
    last_at BIGINT,
    last_run TEXT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_at);
