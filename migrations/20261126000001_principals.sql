-- Threads and runs belong to a principal: the authenticated caller that made the thread (NULL:
-- made without authentication). The runs of a thread all belong to the thread's principal.

ALTER TABLE runs ADD COLUMN principal TEXT;
ALTER TABLE threads ADD COLUMN principal TEXT;
