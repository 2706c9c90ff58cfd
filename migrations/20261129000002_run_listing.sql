-- The run list (A2A ListTasks): a principal's runs, the most recently changed first.
CREATE INDEX runs_by_principal ON runs (principal, updated_at);
