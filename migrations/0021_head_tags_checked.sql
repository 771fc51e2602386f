-- comb:no-transaction
-- The last step of the online upgrade of 0018 (docs/operations.md,
-- "Upgrading to 0021"), outside a transaction: the check 0020 added (no
-- head's tags are NULL) is validated on the rows there are, under a lock
-- (SHARE UPDATE EXCLUSIVE) that lets reads and writes go on.
--
-- artifact_heads_live (0002) stays, although tag predicates no longer use
-- it: the incremental first page and sync snapshots walk it index-only
-- (docs/benchmarks.md, "Query plans").
ALTER TABLE artifact_heads VALIDATE CONSTRAINT artifact_heads_tags_set;
