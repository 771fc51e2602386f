-- Group commit of chat messages (issue 15, services/relay/write/chat.c):
-- the write path stores a run of accepted messages of one batch with one
-- call instead of one comb_store_event call (and one savepoint) each.

-- Stores the events given element by element in the arrays (all of one
-- length; p_channel elements may be NULL) exactly as consecutive calls of
-- comb_store_event in array order would: each event id a community
-- already has, whether stored before or earlier in the same arrays, is
-- left as it is. Returns one row per element, in array order: the stored
-- event's seq and whether this element inserted it. New events take their
-- seq in array order.
CREATE FUNCTION comb_store_events(p_community bigint[], p_id text[],
				  p_pubkey text[], p_created_at bigint[],
				  p_kind integer[], p_channel uuid[],
				  p_raw text[], p_tags json[])
RETURNS TABLE (seq bigint, inserted boolean)
LANGUAGE plpgsql AS $$
DECLARE
	v_new bigint[];
BEGIN
	WITH input AS MATERIALIZED (
		SELECT * FROM unnest(p_community, p_id, p_pubkey, p_created_at,
				     p_kind, p_channel, p_raw, p_tags)
		       WITH ORDINALITY AS i(community_id, id, pubkey, created_at,
					    kind, channel_id, raw, tags, ord)
	), stored AS (
		INSERT INTO events (community_id, id, pubkey, created_at, kind,
				    channel_id, raw)
		SELECT i.community_id, i.id, i.pubkey, i.created_at, i.kind,
		       i.channel_id, i.raw
		  FROM input i ORDER BY i.ord
		ON CONFLICT (community_id, id) DO NOTHING
		RETURNING events.community_id, events.id, events.seq
	), tagged AS (
		-- Copies of one id carry the same signed tags: take the first.
		INSERT INTO event_tags (community_id, event_seq, name, value)
		SELECT s.community_id, s.seq, t->>0, t->>1
		  FROM stored s
		  CROSS JOIN LATERAL (SELECT i.tags FROM input i
				       WHERE i.community_id = s.community_id
					 AND i.id = s.id
				       ORDER BY i.ord LIMIT 1) f
		  CROSS JOIN LATERAL json_array_elements(f.tags) t
		 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
	)
	SELECT coalesce(array_agg(s.seq), '{}') INTO v_new FROM stored s;

	-- A new statement, so that the rows inserted above are visible.
	RETURN QUERY
	SELECT e.seq,
	       e.seq = ANY (v_new)
	       AND i.ord = min(i.ord) OVER (PARTITION BY i.community_id, i.id)
	  FROM unnest(p_community, p_id) WITH ORDINALITY
	       AS i(community_id, id, ord)
	  JOIN events e ON e.community_id = i.community_id AND e.id = i.id
	 ORDER BY i.ord;
END $$;
