-- comb:no-transaction
-- The second step of the online upgrade of 0018 (docs/operations.md,
-- "Upgrading to 0021"), run outside a transaction, one step at a time
-- (comb-admin migrate sends each part between `-- comb:step` lines on its
-- own): every step may run again after a failure.
--
-- 1. The tags of the heads written before 0018 are filled from their
--    artifact_head_tags rows, 1,000 heads a transaction in key order, so
--    that no write waits on more than one batch. A head a writer changed
--    meanwhile already has its tags (tags IS NOT NULL is checked again on
--    the row the UPDATE finds) and is left alone.
-- 2. The GIN index of `current` tag predicates is built CONCURRENTLY
--    (writes go on meanwhile); one an earlier attempt left behind, valid
--    or not, is dropped first (also CONCURRENTLY).
-- 3. The index is checked valid and every head filled, or the migration
--    fails (and is not recorded) before anything relies on either.
DO $$
DECLARE
	v_community bigint := -9223372036854775808;
	v_d uuid := '00000000-0000-0000-0000-000000000000';
	v_last record;
BEGIN
	PERFORM set_config('comb.filling_head_tags', 'on', false);
	LOOP
		SELECT h.community_id, h.d INTO v_last
		  FROM (SELECT k.community_id, k.d FROM artifact_heads k
			 WHERE (k.community_id, k.d) > (v_community, v_d)
			 ORDER BY k.community_id, k.d LIMIT 1000) h
		 ORDER BY h.community_id DESC, h.d DESC LIMIT 1;
		EXIT WHEN NOT FOUND;
		UPDATE artifact_heads h
		   SET tags = coalesce((
			SELECT jsonb_object_agg(x.name, x.vals)
			  FROM (SELECT t.name, jsonb_agg(t.value) AS vals
				  FROM artifact_head_tags t
				 WHERE t.community_id = h.community_id AND t.d = h.d
				 GROUP BY t.name) x), '{}'::jsonb)
		 WHERE (h.community_id, h.d) > (v_community, v_d)
		   AND (h.community_id, h.d) <= (v_last.community_id, v_last.d)
		   AND h.tags IS NULL;
		v_community := v_last.community_id;
		v_d := v_last.d;
		COMMIT;
	END LOOP;
	PERFORM set_config('comb.filling_head_tags', 'off', false);
END $$;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS artifact_heads_tags;
-- comb:step
CREATE INDEX CONCURRENTLY artifact_heads_tags ON artifact_heads
	USING gin (tags jsonb_path_ops) WHERE NOT deleted AND NOT redacted;
-- comb:step
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_index i
			WHERE i.indexrelid = to_regclass('artifact_heads_tags')
			  AND i.indisvalid AND i.indisready) THEN
		RAISE EXCEPTION 'artifact_heads_tags is not valid';
	END IF;
	IF EXISTS (SELECT 1 FROM artifact_heads h WHERE h.tags IS NULL) THEN
		RAISE EXCEPTION 'heads without tags remain';
	END IF;
END $$;
-- comb:step
ANALYZE artifact_heads;
