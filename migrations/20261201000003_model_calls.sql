-- A model's calls and tokens of the last minute, for rate limits that instances share: one row
-- per call admitted (requests 1) and per usage reported (its tokens), by the model's name and
-- the time (ms since the epoch); rows older than a minute are deleted as calls are admitted.
CREATE TABLE model_calls (
    model TEXT NOT NULL,
    at BIGINT NOT NULL,
    requests BIGINT NOT NULL,
    tokens BIGINT NOT NULL
);
CREATE INDEX model_calls_by_time ON model_calls (model, at);
