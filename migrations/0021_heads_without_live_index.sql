-- comb:no-transaction
-- The last step of the online upgrade of 0018 (docs/operations.md,
-- "Upgrading to 0021"), outside a transaction:
--
-- artifact_heads_live (0002) served `current` reads driven by a tag
-- predicate, one lookup per matching artifact_head_tags row. Those reads
-- now find the heads through artifact_heads_tags (0019) and read each
-- from the table, so every head write keeps one index fewer. It goes
-- CONCURRENTLY, without blocking writes.
--
-- The constraint 0020 added is checked on the rows there are, under a
-- lock that lets writes go on.
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_live;
-- comb:step
ALTER TABLE artifact_heads VALIDATE CONSTRAINT artifact_heads_tags_set;
