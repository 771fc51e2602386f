-- An artifact revision's d is no longer also kept as an event_tags row
-- (docs/benchmarks.md, "Fewer rows per artifact create"; issue 38).
--
-- A kind-45010 event has exactly one d tag, a canonical uuid
-- (artifact_envelope_check), and its revision's ledger row
-- (artifact_revisions, stored by the same transaction) holds the same d,
-- indexed by artifact_revisions_by_d (community_id, d, seq). A plain
-- filter's "#d" now reads both: the event_tags rows of other kinds' d tags
-- and the revisions of that d (services/relay/proto/filter.c), so an
-- artifact create writes one row and two index entries fewer (3 of its
-- 23.3 WAL records). The store functions (comb_store_event and
-- comb_store_events of 0013) as they were, but for the d tag of a kind
-- 45010 event; the rows stored before go in 0024, in batches.
--
-- One transaction, brief locks: only functions are replaced (the two
-- store functions, and comb_artifact_create_run below). Run
-- it after the relay nodes run a release that reads "#d" from both
-- (docs/operations.md, "Upgrading to 0023"): a previous release reads
-- "#d" from event_tags alone and would miss the revisions stored from
-- here on.

CREATE OR REPLACE FUNCTION comb_store_event(p_community bigint, p_id text, p_pubkey text,
				 p_created_at bigint, p_kind integer,
				 p_channel uuid, p_raw text, p_tags json,
				 OUT seq bigint, OUT inserted boolean)
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO events (community_id, id, pubkey, created_at, kind, channel_id, raw)
	VALUES (p_community, p_id, p_pubkey, p_created_at, p_kind, p_channel, p_raw)
	ON CONFLICT (community_id, id) DO NOTHING
	RETURNING events.seq INTO seq;
	inserted := FOUND;
	IF NOT inserted THEN
		SELECT e.seq INTO seq FROM events e
		 WHERE e.community_id = p_community AND e.id = p_id;
		RETURN;
	END IF;
	INSERT INTO event_tags (community_id, event_seq, name, value)
	SELECT p_community, seq, t->>0, t->>1 FROM json_array_elements(p_tags) t
	 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
	   AND t->>0 <> 'h' AND NOT (p_kind = 45010 AND t->>0 = 'd');
END $$;

CREATE OR REPLACE FUNCTION comb_store_events(p_community bigint[], p_id text[],
				  p_pubkey text[], p_created_at bigint[],
				  p_kind integer[], p_channel uuid[],
				  p_raw text[], p_tags json[])
RETURNS TABLE (seq bigint, inserted boolean)
LANGUAGE plpgsql AS $$
DECLARE
	v_key text[];     -- community:id of each event inserted here
	v_seq bigint[];   -- and its seq
BEGIN
	WITH stored AS (
		INSERT INTO events (community_id, id, pubkey, created_at, kind,
				    channel_id, raw)
		SELECT * FROM unnest(p_community, p_id, p_pubkey, p_created_at,
				     p_kind, p_channel, p_raw)
		ON CONFLICT (community_id, id) DO NOTHING
		RETURNING events.community_id, events.id, events.seq
	), tagged AS (
		-- Copies of one id carry the same signed tags: take the first.
		INSERT INTO event_tags (community_id, event_seq, name, value)
		SELECT s.community_id, s.seq, t->>0, t->>1
		  FROM stored s
		  JOIN (SELECT DISTINCT ON (u.community_id, u.id)
			       u.community_id, u.id, u.kind, u.tags
			  FROM unnest(p_community, p_id, p_kind, p_tags) WITH ORDINALITY
			       AS u(community_id, id, kind, tags, ord)
			 ORDER BY u.community_id, u.id, u.ord) f
		    ON f.community_id = s.community_id AND f.id = s.id
		  CROSS JOIN LATERAL json_array_elements(f.tags) t
		 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
		   AND t->>0 <> 'h' AND NOT (f.kind = 45010 AND t->>0 = 'd')
	)
	SELECT array_agg(s.community_id || ':' || s.id), array_agg(s.seq)
	  INTO v_key, v_seq FROM stored s;

	-- A new statement, so that events stored before are looked up as
	-- they are now.
	RETURN QUERY
	SELECT coalesce(n.seq, (SELECT e.seq FROM events e
				 WHERE e.community_id = i.community_id
				   AND e.id = i.id)),
	       n.seq IS NOT NULL
	       AND i.ord = min(i.ord) OVER (PARTITION BY i.community_id, i.id)
	  FROM unnest(p_community, p_id) WITH ORDINALITY
	       AS i(community_id, id, ord)
	  LEFT JOIN unnest(v_key, v_seq) AS n(key, seq)
	    ON n.key = i.community_id || ':' || i.id
	 ORDER BY i.ord;
END $$;

-- comb_artifact_create_run (0018) as it was, but for its events: stored
-- by the run's own INSERT instead of comb_store_events (one WAL record and
-- the key's second probe fewer per create), and without their d rows.
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
		-- The events, inserted as they are: no ON CONFLICT (whose
		-- speculative insertion costs a WAL record and a probe of the
		-- key per row), since none of them can be stored already. A
		-- kind-45010 event is only ever stored with its revision, whose
		-- absence the check above saw under the lock on its d, and the
		-- creates of one run have distinct d, hence distinct ids. Their
		-- single-letter tags but d and h go to event_tags (the d of a
		-- revision is read from artifact_revisions).
		WITH stored AS (
			INSERT INTO events (community_id, id, pubkey, created_at,
					    kind, channel_id, raw)
			SELECT p_community[s.i], p_id[s.i], p_pubkey[s.i],
			       p_created_at[s.i], 45010, p_h[s.i], p_raw[s.i]
			  FROM unnest(v_stored) AS s(i)
			RETURNING events.community_id, events.id, events.seq
		), tagged AS (
			INSERT INTO event_tags (community_id, event_seq, name, value)
			SELECT s.community_id, s.seq, t->>0, t->>1
			  FROM stored s
			  JOIN unnest(v_stored) AS u(i)
			    ON p_community[u.i] = s.community_id AND p_id[u.i] = s.id
			 CROSS JOIN LATERAL json_array_elements(p_tags[u.i]) t
			 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
			   AND t->>0 NOT IN ('d', 'h')
		)
		SELECT array_agg(s.seq ORDER BY u.k),
		       array_fill(true, ARRAY[cardinality(v_stored)])
		  INTO v_seq, v_inserted
		  FROM unnest(v_stored) WITH ORDINALITY AS u(i, k)
		  JOIN stored s
		    ON s.community_id = p_community[u.i] AND s.id = p_id[u.i];
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
