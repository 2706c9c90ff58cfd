-- A thread forked from another: the thread forked (`forked_from`), and the last of its messages
-- the fork kept (`forked_at`; NULL: none). A thread's forks are listed as its branches.

ALTER TABLE threads ADD COLUMN forked_from TEXT;
ALTER TABLE threads ADD COLUMN forked_at TEXT;
CREATE INDEX threads_by_fork ON threads (forked_from);
