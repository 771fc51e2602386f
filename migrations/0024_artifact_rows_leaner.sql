-- comb:no-transaction
-- The second step of the online upgrade of 0023 (docs/operations.md,
-- "Upgrading to 0023"), run outside a transaction, one step at a time
-- (comb-admin migrate sends each part between `-- comb:step` lines on its
-- own): every step may run again after a failure.
--
-- 1. The d rows of artifact revisions stored before 0023 leave
--    event_tags, 5,000 event seqs a transaction in seq order, so that no
--    write waits on more than one batch ("#d" reads them from
--    artifact_revisions since 0023's release).
-- 2. artifact_heads_live, the partial index of live heads by d that
--    covered channel_id, accepted_seq and type, is folded into the primary
--    key: a new unique index (community_id, d) INCLUDE (channel_id,
--    accepted_seq, type, deleted, redacted) is built CONCURRENTLY, checked
--    valid, and put in the primary key's place (ALTER TABLE ... USING
--    INDEX: an exclusive lock held for a catalog change only, no scan,
--    waiting at most 5 s for it); then artifact_heads_live is dropped
--    CONCURRENTLY. The incremental first page and sync snapshots walk the
--    key index-only as they walked artifact_heads_live (filtering deleted
--    and redacted heads on its included columns), and a create writes one
--    index entry fewer. Since every head change moves accepted_seq (in
--    artifact_heads_current's key), no update of a head was HOT before
--    either: the key's new columns cost no write.
-- 3. artifact_heads_by_home (community_id, channel_id, d) is rebuilt to
--    cover accepted_seq, type, deleted and redacted too (CONCURRENTLY,
--    checked valid, the old one dropped CONCURRENTLY, the new one renamed
--    in its place): with the wider key alone, the catch-up's "gained"
--    heads (every head of a channel the reader was granted,
--    comb_incremental_changes) were planned as a walk of the whole key
--    hashed against the grants, now an index-only probe per granted
--    channel, as before and without heap fetches. Same entries, so no
--    write costs more than before.
-- 4. No artifact d row is left in event_tags, or the migration fails (and
--    is not recorded).
DO $$
DECLARE
	v_from bigint := 0;
	v_max bigint;
BEGIN
	SELECT coalesce(max(t.event_seq), 0) INTO v_max FROM event_tags t;
	WHILE v_from <= v_max LOOP
		DELETE FROM event_tags t USING events e
		 WHERE t.event_seq >= v_from AND t.event_seq < v_from + 5000
		   AND t.name = 'd' AND e.seq = t.event_seq AND e.kind = 45010;
		v_from := v_from + 5000;
		COMMIT;
	END LOOP;
END $$;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_key_covering;
-- comb:step
CREATE UNIQUE INDEX CONCURRENTLY artifact_heads_key_covering
	ON artifact_heads (community_id, d)
	INCLUDE (channel_id, accepted_seq, type, deleted, redacted);
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_home_covering;
-- comb:step
CREATE INDEX CONCURRENTLY artifact_heads_home_covering
	ON artifact_heads (community_id, channel_id, d)
	INCLUDE (accepted_seq, type, deleted, redacted);
-- comb:step
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_index i
			WHERE i.indexrelid = to_regclass('artifact_heads_key_covering')
			  AND i.indisvalid AND i.indisready) THEN
		RAISE EXCEPTION 'artifact_heads_key_covering is not valid';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_index i
			WHERE i.indexrelid = to_regclass('artifact_heads_home_covering')
			  AND i.indisvalid AND i.indisready) THEN
		RAISE EXCEPTION 'artifact_heads_home_covering is not valid';
	END IF;
	SET LOCAL lock_timeout = '5s';
	ALTER TABLE artifact_heads DROP CONSTRAINT artifact_heads_pkey,
		ADD CONSTRAINT artifact_heads_pkey PRIMARY KEY
		USING INDEX artifact_heads_key_covering;
END $$;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_live;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_by_home;
-- comb:step
ALTER INDEX artifact_heads_home_covering RENAME TO artifact_heads_by_home;
-- comb:step
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM event_tags t JOIN events e ON e.seq = t.event_seq
		    WHERE t.name = 'd' AND e.kind = 45010) THEN
		RAISE EXCEPTION 'artifact d rows remain in event_tags';
	END IF;
END $$;
-- comb:step
ANALYZE artifact_heads;
ANALYZE event_tags;
