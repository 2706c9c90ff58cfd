-- Only forked threads are in the index of forks: a thread that is no fork (most of them) no
-- longer adds an entry to it when it is made. A thread's forks are found by `forked_from = ?`,
-- which only a forked thread can match.

DROP INDEX threads_by_fork;
CREATE INDEX threads_by_fork ON threads (forked_from) WHERE forked_from IS NOT NULL;
