-- Group commit (issue 15, services/relay/write/batch.c): a run of
-- consecutive writes of one kind in a batch is stored with one call
-- instead of one call (and one savepoint round trip) each.

-- Stores the events given element by element in the arrays (all of one
-- length; p_channel elements may be NULL) exactly as consecutive calls of
-- comb_store_event in array order would: each event id a community
-- already has, whether stored before or earlier in the same arrays, is
-- left as it is. Returns one row per element, in array order: the stored
-- event's seq and whether this element inserted it. The insert reads
-- unnest's rows in array order, so new events take their seq in it.
CREATE FUNCTION comb_store_events(p_community bigint[], p_id text[],
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
			       u.community_id, u.id, u.tags
			  FROM unnest(p_community, p_id, p_tags) WITH ORDINALITY
			       AS u(community_id, id, tags, ord)
			 ORDER BY u.community_id, u.id, u.ord) f
		    ON f.community_id = s.community_id AND f.id = s.id
		  CROSS JOIN LATERAL json_array_elements(f.tags) t
		 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
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

-- Group commit of artifact writes (services/relay/write/artifact_write.c):
-- a run of writes that are not moves, one call of comb_artifact_write
-- each, in array order, in one round trip. Each write sees the ones
-- before it exactly as if they had been separate statements, and a
-- refusal stores nothing, so no savepoint is needed between them; an
-- error fails the whole call and the relay then runs the writes one by
-- one. The write keys are int[] literals, one text element per write
-- (p_delete_keys elements NULL when the op is neither delete nor restore).
-- Returns one row per element, in array order.
CREATE FUNCTION comb_artifact_write_run(
	p_community bigint[], p_id text[], p_pubkey text[], p_created_at bigint[],
	p_raw text[], p_tags json[], p_d uuid[], p_h uuid[], p_type text[],
	p_op text[], p_prev text[], p_root text[], p_fresh boolean[],
	p_write_keys text[], p_delete_keys text[])
RETURNS TABLE (outcome integer, inserted boolean)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. coalesce(array_length(p_id, 1), 0) LOOP
		SELECT w.outcome, w.inserted INTO outcome, inserted
		  FROM comb_artifact_write(p_community[i], p_id[i], p_pubkey[i],
					   p_created_at[i], p_raw[i], p_tags[i],
					   p_d[i], p_h[i], p_type[i], p_op[i],
					   p_prev[i], p_root[i], p_fresh[i],
					   p_write_keys[i]::integer[],
					   p_delete_keys[i]::integer[]) w;
		RETURN NEXT;
	END LOOP;
END $$;
