-- Threads are named and archived by their clients: the name given (NULL: the thread is called by
-- the first line of its first prompt, `title`), and whether it is archived (1) or not (0).

ALTER TABLE threads ADD COLUMN name TEXT;
ALTER TABLE threads ADD COLUMN archived BIGINT NOT NULL DEFAULT 0;
