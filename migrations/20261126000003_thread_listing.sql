-- Threads are listed (an editor's sessions, newest first): each with its title (the first line of
-- its first prompt) and the directory it works in (NULL: not an editor's session).

ALTER TABLE threads ADD COLUMN title TEXT;
ALTER TABLE threads ADD COLUMN workspace TEXT;
CREATE INDEX threads_by_principal ON threads (principal, updated_at);
