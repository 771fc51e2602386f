-- A stored event's channel is no longer also kept as an event_tags row.
--
-- Since 0010 every plain filter's "#h" is answered by events.channel_id
-- (an event's h tag names its channel: see 0010), so the h rows of
-- event_tags are read by nothing: each stored event wrote one row and
-- three index entries for no reader (a chat message: two rows where one
-- does; an artifact revision: eight where seven do). The store functions
-- (comb_store_event of 0001, comb_store_events of 0006) as they were, but
-- for the h tag; the rows stored before go; and comb_event_channel_ok,
-- which the tests ask of every event they stored, reads the event's own
-- tags instead.

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
	   AND t->>0 <> 'h';
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
			       u.community_id, u.id, u.tags
			  FROM unnest(p_community, p_id, p_tags) WITH ORDINALITY
			       AS u(community_id, id, tags, ord)
			 ORDER BY u.community_id, u.id, u.ord) f
		    ON f.community_id = s.community_id AND f.id = s.id
		  CROSS JOIN LATERAL json_array_elements(f.tags) t
		 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
		   AND t->>0 <> 'h'
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

-- True when the h tags (of two elements or more) of stored event p_seq
-- all name p_channel, and it has one exactly when p_channel is set.
CREATE OR REPLACE FUNCTION comb_event_channel_ok(p_seq bigint, p_channel uuid)
RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT coalesce(bool_and(t->>1 = p_channel::text), true)
	       AND (p_channel IS NULL) = (count(*) = 0)
	  FROM events e
	 CROSS JOIN LATERAL json_array_elements(e.raw::json->'tags') t
	 WHERE e.seq = p_seq AND t->>0 = 'h' AND json_array_length(t) >= 2
$$;

DELETE FROM event_tags WHERE name = 'h';
