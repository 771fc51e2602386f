-- A run of artifact writes tells the relay each new revision's seq, so
-- that the node that stored it keeps its bytes in its revision cache (as
-- it does for chat messages, comb_store_events) and a read or live
-- delivery on that node finds them there instead of reading them back.
--
-- comb_artifact_create_run and comb_artifact_write_run (0007) as they
-- were, each row now with seq: the stored event's events.seq when the
-- write stored a new event (outcome 0, inserted), otherwise NULL. A write
-- that comb_artifact_write stores (one alone, or one of a run outside a
-- stretch of creates) has its seq read back by the event's id.

-- The seq of event p_id of community p_community, stored earlier in this
-- transaction. VOLATILE, so that it sees what a function called earlier in
-- the same statement (comb_artifact_write) stored.
CREATE FUNCTION comb_written_seq(p_community bigint, p_id text)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	RETURN (SELECT e.seq FROM events e
		 WHERE e.community_id = p_community AND e.id = p_id);
END $$;

DROP FUNCTION comb_artifact_write_run(bigint[], text[], text[], bigint[],
	text[], json[], uuid[], uuid[], text[], text[], text[], text[],
	boolean[], text[], text[]);
DROP FUNCTION comb_artifact_create_run(bigint[], text[], text[], bigint[],
	text[], json[], uuid[], uuid[], text[], text[], boolean[], text[]);

CREATE FUNCTION comb_artifact_create_run(
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
					    creator, root)
		SELECT p_community[s.i], p_d[s.i], p_id[s.i], s.seq, p_h[s.i],
		       p_type[s.i], p_pubkey[s.i], p_root[s.i]
		  FROM unnest(v_stored, v_seq) AS s(i, seq)
		 ORDER BY s.i;
		-- As comb_artifact_write: (name, first value) of every tag but
		-- d, h and type, each pair once per head.
		INSERT INTO artifact_head_tags (community_id, d, name, value)
		SELECT DISTINCT p_community[s.i], p_d[s.i], t->>0, t->>1
		  FROM unnest(v_stored) AS s(i)
		 CROSS JOIN LATERAL json_array_elements(p_tags[s.i]) t
		 WHERE json_array_length(t) >= 2
		   AND t->>0 NOT IN ('d', 'h', 'type');
	END IF;

	RETURN QUERY
	SELECT o.outcome, coalesce(s.inserted, false), s.seq
	  FROM unnest(v_outcome) WITH ORDINALITY AS o(outcome, i)
	  LEFT JOIN unnest(v_stored, v_inserted, v_seq) AS s(i, inserted, seq)
		 ON s.i = o.i
	 ORDER BY o.i;
END $$;

CREATE FUNCTION comb_artifact_write_run(
	p_community bigint[], p_id text[], p_pubkey text[], p_created_at bigint[],
	p_raw text[], p_tags json[], p_d uuid[], p_h uuid[], p_type text[],
	p_op text[], p_prev text[], p_root text[], p_fresh boolean[],
	p_write_keys text[], p_delete_keys text[])
RETURNS TABLE (outcome integer, inserted boolean, seq bigint)
LANGUAGE plpgsql AS $$
DECLARE
	v_n integer := coalesce(array_length(p_id, 1), 0);
	v_from integer := 1;  -- the next write
	v_to integer;         -- one past the stretch of creates from v_from
BEGIN
	WHILE v_from <= v_n LOOP
		v_to := v_from;
		WHILE v_to <= v_n AND p_op[v_to] = 'create'
		      AND NOT coalesce(p_d[v_to] = ANY (p_d[v_from:v_to - 1]),
				       false) LOOP
			v_to := v_to + 1;
		END LOOP;
		IF v_to - v_from >= 2 THEN
			RETURN QUERY
			SELECT * FROM comb_artifact_create_run(
				p_community[v_from:v_to - 1], p_id[v_from:v_to - 1],
				p_pubkey[v_from:v_to - 1],
				p_created_at[v_from:v_to - 1], p_raw[v_from:v_to - 1],
				p_tags[v_from:v_to - 1], p_d[v_from:v_to - 1],
				p_h[v_from:v_to - 1], p_type[v_from:v_to - 1],
				p_root[v_from:v_to - 1], p_fresh[v_from:v_to - 1],
				p_write_keys[v_from:v_to - 1]);
			v_from := v_to;
			CONTINUE;
		END IF;
		SELECT w.outcome, w.inserted INTO outcome, inserted
		  FROM comb_artifact_write(p_community[v_from], p_id[v_from],
			p_pubkey[v_from], p_created_at[v_from], p_raw[v_from],
			p_tags[v_from], p_d[v_from], p_h[v_from], p_type[v_from],
			p_op[v_from], p_prev[v_from], p_root[v_from],
			p_fresh[v_from], p_write_keys[v_from]::integer[],
			p_delete_keys[v_from]::integer[]) w;
		seq := CASE WHEN outcome = 0 AND inserted
			    THEN comb_written_seq(p_community[v_from], p_id[v_from]) END;
		RETURN NEXT;
		v_from := v_from + 1;
	END LOOP;
END $$;
