-- A head's tags move into the head row (docs/benchmarks.md, "The leaner
-- artifact row"): artifact_heads.tags holds the (name, first value) pairs
-- of the current revision's tags but d, h and type, as a JSON object of
-- name to the array of its distinct values ({"status": ["open"], "x":
-- ["1"]}), '{}' when there are none. A GIN index (jsonb_path_ops: one
-- hashed entry per name and value, so values of 4,096 bytes fit, and an
-- exact recheck of @> on the row) answers `current` tag predicates
-- (0019). An artifact create then writes one head row instead of the head
-- and four tag rows with two index entries each.
--
-- The first of four steps of an online upgrade (docs/operations.md,
-- "Upgrading to 0021"): this one adds the column (NULL until filled, so
-- no table rewrite) and makes every writer fill it; until 0020, a
-- transitional trigger keeps artifact_head_tags in step with it, so that
-- relays of the previous release, which read that table, stay exact while
-- 0019 fills the column of the heads written before.

ALTER TABLE artifact_heads ADD COLUMN tags jsonb;

-- The head tags of a revision with tags p_tags (its event's tags): every
-- tag of two elements or more but d, h and type, as name -> distinct first
-- values; '{}' when there is none.
CREATE FUNCTION comb_head_tags(p_tags json) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT coalesce(jsonb_object_agg(x.name, x.vals), '{}'::jsonb)
	  FROM (SELECT t->>0 AS name, jsonb_agg(DISTINCT t->>1) AS vals
		  FROM json_array_elements(p_tags) t
		 WHERE json_array_length(t) >= 2
		   AND t->>0 NOT IN ('d', 'h', 'type')
		 GROUP BY t->>0) x
$$;

-- Transitional (dropped by 0020): artifact_head_tags mirrors the tags a
-- writer stores, for relays of the previous release. 0019, which fills
-- the column from those rows, says so with the setting
-- comb.filling_head_tags and is not mirrored back.
CREATE FUNCTION comb_mirror_head_tags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM artifact_head_tags t
	 WHERE t.community_id = NEW.community_id AND t.d = NEW.d;
	INSERT INTO artifact_head_tags (community_id, d, name, value)
	SELECT NEW.community_id, NEW.d, e.key, v.value
	  FROM jsonb_each(NEW.tags) e
	 CROSS JOIN LATERAL jsonb_array_elements_text(e.value) v;
	RETURN NULL;
END $$;
CREATE TRIGGER artifact_heads_mirror_tags_inserted AFTER INSERT ON artifact_heads
	FOR EACH ROW WHEN (NEW.tags IS NOT NULL)
	EXECUTE FUNCTION comb_mirror_head_tags();
CREATE TRIGGER artifact_heads_mirror_tags_updated AFTER UPDATE OF tags ON artifact_heads
	FOR EACH ROW WHEN (NEW.tags IS DISTINCT FROM OLD.tags
			   AND current_setting('comb.filling_head_tags', true)
			       IS DISTINCT FROM 'on')
	EXECUTE FUNCTION comb_mirror_head_tags();

-- comb_artifact_write (0002) as it was, but for the head's tags: stored
-- in the head row by the same INSERT or UPDATE.
CREATE OR REPLACE FUNCTION comb_artifact_write(
	p_community bigint, p_id text, p_pubkey text, p_created_at bigint,
	p_raw text, p_tags json, p_d uuid, p_h uuid, p_type text, p_op text,
	p_prev text, p_root text, p_fresh boolean, p_write_keys integer[],
	p_delete_keys integer[],
	OUT outcome integer, OUT inserted boolean, OUT source uuid,
	OUT replaced text)
LANGUAGE plpgsql AS $$
DECLARE
	v_admin boolean;
	v_head artifact_heads%ROWTYPE;
	v_home integer;
	v_seq bigint;
BEGIN
	inserted := false;
	IF EXISTS (SELECT 1 FROM artifact_revisions r
		    WHERE r.community_id = p_community AND r.id = p_id) THEN
		outcome := 1;
		RETURN;
	END IF;
	IF NOT p_fresh THEN
		outcome := 3;
		RETURN;
	END IF;
	IF p_op IN ('create', 'move') THEN
		IF p_op = 'move' THEN
			SELECT h.channel_id INTO source FROM artifact_heads h
			 WHERE h.community_id = p_community AND h.d = p_d;
		END IF;
		PERFORM 1 FROM channels c
		 WHERE c.community_id = p_community
		   AND c.id IN (p_h, source)
		 ORDER BY c.id FOR SHARE;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtextextended(
		'comb.artifact:' || p_community || ':' || p_d, 0));
	-- A concurrent copy of this very event may have won the lock.
	IF EXISTS (SELECT 1 FROM artifact_revisions r
		    WHERE r.community_id = p_community AND r.id = p_id) THEN
		outcome := 2;
		RETURN;
	END IF;
	v_admin := EXISTS (SELECT 1 FROM community_admins a
			    WHERE a.community_id = p_community
			      AND a.pubkey = p_pubkey);
	SELECT * INTO v_head FROM artifact_heads h
	 WHERE h.community_id = p_community AND h.d = p_d FOR UPDATE;
	-- Moved meanwhile: lock the source it has now.
	IF p_op = 'move' AND v_head.d IS NOT NULL
	   AND v_head.channel_id IS DISTINCT FROM source THEN
		PERFORM 1 FROM channels c
		 WHERE c.community_id = p_community AND c.id = v_head.channel_id
		   FOR SHARE;
	END IF;
	IF p_op = 'create' THEN
		IF NOT coalesce(comb_write_key(p_community, p_h, p_pubkey, v_admin)
				= ANY (p_write_keys), false) THEN
			outcome := 4;
			RETURN;
		END IF;
		IF v_head.d IS NOT NULL THEN
			outcome := 5;
			RETURN;
		END IF;
	ELSE
		IF v_head.d IS NULL THEN
			outcome := 6;
			RETURN;
		END IF;
		v_home := comb_write_key(p_community, v_head.channel_id, p_pubkey,
					 v_admin);
		IF NOT coalesce(v_home = ANY (p_write_keys), false) THEN
			outcome := 6;
			RETURN;
		END IF;
		IF p_prev IS DISTINCT FROM v_head.revision_id THEN
			outcome := 7;
			RETURN;
		END IF;
		IF p_type <> v_head.type THEN
			outcome := 8;
			RETURN;
		END IF;
		IF (p_op = 'restore') <> v_head.deleted THEN
			outcome := 9;
			RETURN;
		END IF;
		IF (p_op = 'move') = (p_h = v_head.channel_id) THEN
			outcome := 10;
			RETURN;
		END IF;
		IF p_op = 'move' AND NOT coalesce(comb_write_key(p_community, p_h,
				p_pubkey, v_admin) = ANY (p_write_keys), false) THEN
			outcome := 4;
			RETURN;
		END IF;
		IF p_op IN ('delete', 'restore') AND NOT coalesce(
			v_home + ((p_pubkey = v_head.creator)::integer << 9)
				= ANY (p_delete_keys), false) THEN
			outcome := 11;
			RETURN;
		END IF;
	END IF;
	-- A new or changed root must be a message in h (for a move, in the
	-- destination, changed or not); a delete may only repeat the stored
	-- root, which it keeps.
	IF p_root IS NOT NULL THEN
		IF p_op = 'delete' THEN
			IF p_root IS DISTINCT FROM v_head.root THEN
				outcome := 12;
				RETURN;
			END IF;
		ELSIF (p_op IN ('create', 'move') OR p_root IS DISTINCT FROM v_head.root)
		      AND NOT EXISTS (SELECT 1 FROM events e
				       WHERE e.community_id = p_community
					 AND e.id = p_root AND e.kind = 9
					 AND e.channel_id = p_h
					 AND NOT e.deleted AND NOT e.redacted) THEN
			outcome := 12;
			RETURN;
		END IF;
	END IF;
	IF p_op = 'delete' THEN
		p_root := v_head.root;
	END IF;

	SELECT s.seq, s.inserted INTO v_seq, inserted
	  FROM comb_store_event(p_community, p_id, p_pubkey, p_created_at,
				45010, p_h, p_raw, p_tags) s;
	INSERT INTO artifact_revisions (community_id, id, d, seq, channel_id,
					type, op, prev)
	VALUES (p_community, p_id, p_d, v_seq, p_h, p_type, p_op, p_prev);
	IF p_op = 'create' THEN
		INSERT INTO artifact_heads (community_id, d, revision_id,
					    accepted_seq, channel_id, type,
					    creator, root, tags)
		VALUES (p_community, p_d, p_id, v_seq, p_h, p_type, p_pubkey,
			p_root, comb_head_tags(p_tags));
	ELSE
		UPDATE artifact_heads h
		   SET revision_id = p_id, accepted_seq = v_seq, channel_id = p_h,
		       deleted = (p_op = 'delete'), root = p_root, redacted = false,
		       tags = comb_head_tags(p_tags)
		 WHERE h.community_id = p_community AND h.d = p_d;
	END IF;
	source := v_head.channel_id;
	replaced := v_head.revision_id;
	outcome := 0;
END $$;

-- comb_artifact_create_run (0012) as it was, but for the heads' tags:
-- stored in the head rows by the same INSERT (comb_head_tags of each).
CREATE OR REPLACE FUNCTION comb_artifact_create_run(
	p_community bigint[], p_id text[], p_pubkey text[], p_created_at bigint[],
	p_raw text[], p_tags json[], p_d uuid[], p_h uuid[], p_type text[],
	p_root text[], p_fresh boolean[], p_write_keys text[])
RETURNS TABLE (outcome integer, inserted boolean, seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
	v_outcome integer[];  -- each element's outcome
	v_stored integer[];   -- the positions of those to store, in order
	v_seq bigint[];       -- and their events' seq
	v_inserted boolean[]; -- and whether their events were new
BEGIN
	PERFORM 1 FROM channels c
	 WHERE (c.community_id, c.id) IN (SELECT * FROM unnest(p_community, p_h))
	 ORDER BY c.community_id, c.id FOR SHARE;
	PERFORM pg_advisory_xact_lock(k.key)
	  FROM (SELECT DISTINCT hashtextextended(
			'comb.artifact:' || u.community || ':' || u.d, 0) AS key
		  FROM unnest(p_community, p_d) AS u(community, d)
		 ORDER BY 1) k;

	-- The checks of a create in comb_artifact_write's order; the write
	-- permission once per channel, signer and list of allowed keys.
	WITH w AS (
		SELECT * FROM unnest(p_community, p_id, p_pubkey, p_d, p_h,
				     p_root, p_fresh, p_write_keys) WITH ORDINALITY
		       AS u(community, id, pubkey, d, h, root, fresh, keys, ord)
	), k AS (
		SELECT s.community, s.h, s.pubkey, s.keys,
		       coalesce(comb_write_key(s.community, s.h, s.pubkey, EXISTS (
				SELECT 1 FROM community_admins a
				 WHERE a.community_id = s.community
				   AND a.pubkey = s.pubkey))
				= ANY (s.keys::integer[]), false) AS allowed
		  FROM (SELECT DISTINCT community, h, pubkey, keys FROM w) s
	)
	SELECT array_agg(CASE
		WHEN EXISTS (SELECT 1 FROM artifact_revisions r
			      WHERE r.community_id = w.community AND r.id = w.id)
			THEN 1
		WHEN NOT w.fresh THEN 3
		WHEN NOT k.allowed THEN 4
		WHEN EXISTS (SELECT 1 FROM artifact_heads h
			      WHERE h.community_id = w.community AND h.d = w.d)
			THEN 5
		WHEN w.root IS NOT NULL AND NOT EXISTS (
			SELECT 1 FROM events e
			 WHERE e.community_id = w.community AND e.id = w.root
			   AND e.kind = 9 AND e.channel_id = w.h
			   AND NOT e.deleted AND NOT e.redacted)
			THEN 12
		ELSE 0 END ORDER BY w.ord)
	  INTO v_outcome
	  FROM w JOIN k ON k.community = w.community
			AND k.h IS NOT DISTINCT FROM w.h
			AND k.pubkey IS NOT DISTINCT FROM w.pubkey
			AND k.keys IS NOT DISTINCT FROM w.keys;

	SELECT array_agg(o.i ORDER BY o.i) INTO v_stored
	  FROM unnest(v_outcome) WITH ORDINALITY AS o(outcome, i)
	 WHERE o.outcome = 0;
	IF v_stored IS NOT NULL THEN
		SELECT array_agg(s.seq ORDER BY s.k),
		       array_agg(s.inserted ORDER BY s.k)
		  INTO v_seq, v_inserted
		  FROM comb_store_events(comb_pick(p_community, v_stored),
			comb_pick(p_id, v_stored), comb_pick(p_pubkey, v_stored),
			comb_pick(p_created_at, v_stored),
			array_fill(45010, ARRAY[cardinality(v_stored)]),
			comb_pick(p_h, v_stored), comb_pick(p_raw, v_stored),
			comb_pick(p_tags, v_stored)) WITH ORDINALITY AS s(seq, inserted, k);
		INSERT INTO artifact_revisions (community_id, id, d, seq,
						channel_id, type, op)
		SELECT p_community[s.i], p_id[s.i], p_d[s.i], s.seq, p_h[s.i],
		       p_type[s.i], 'create'
		  FROM unnest(v_stored, v_seq) AS s(i, seq);
		INSERT INTO artifact_heads (community_id, d, revision_id,
					    accepted_seq, channel_id, type,
					    creator, root, tags)
		SELECT p_community[s.i], p_d[s.i], p_id[s.i], s.seq, p_h[s.i],
		       p_type[s.i], p_pubkey[s.i], p_root[s.i], ht.tags
		  FROM unnest(v_stored, v_seq) AS s(i, seq)
		 -- comb_head_tags(p_tags[s.i]), written out: a call per head
		 -- would cost a function call and its own statement each
		 CROSS JOIN LATERAL (
			SELECT coalesce(jsonb_object_agg(x.name, x.vals), '{}'::jsonb)
			       AS tags
			  FROM (SELECT t->>0 AS name, jsonb_agg(DISTINCT t->>1) AS vals
				  FROM json_array_elements(p_tags[s.i]) t
				 WHERE json_array_length(t) >= 2
				   AND t->>0 NOT IN ('d', 'h', 'type')
				 GROUP BY t->>0) x) ht
		 ORDER BY s.i;
	END IF;

	RETURN QUERY
	SELECT o.outcome, coalesce(s.inserted, false), s.seq
	  FROM unnest(v_outcome) WITH ORDINALITY AS o(outcome, i)
	  LEFT JOIN unnest(v_stored, v_inserted, v_seq) AS s(i, inserted, seq)
		 ON s.i = o.i
	 ORDER BY o.i;
END $$;
