-- Running runs are found through the partial unique index of running runs (one per thread);
-- an index of every run by status and lease cost each start and each end two more B-tree writes.

DROP INDEX runs_by_lease;
