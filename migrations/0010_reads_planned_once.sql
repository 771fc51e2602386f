-- Reads whose plan is made once per connection (PL/pgSQL functions that
-- keep a generic plan, plan_cache_mode = force_generic_plan) where the
-- plan is the same whatever the parameters and planning it cost more than
-- running it: a plain filter of one channel, and a page of an unscoped
-- incremental listing.
--
-- Plain filters read a channel by its column, not by its tag.
--
-- An event's channel is its h tag: every stored event either has no
-- channel and no h tag, or a channel and h tags (of two elements or more)
-- that all name it. Every write path of the relay checks this before
-- storing (a message, moderation event, artifact revision or relay marker
-- has exactly one canonical h and is stored in that channel; a deletion
-- has at most one), the end-to-end tests check it of everything they
-- stored (comb_event_channel_ok), and the events stored before this
-- migration are checked once below. (Checking it again inside the store
-- functions cost a tenth to a quarter of their time per event: the
-- relay's own checks are where it is kept.) With it, a plain filter's "#h" is the same as a condition
-- on events.channel_id, which the relay uses (read/query.c): PostgreSQL
-- reads a channel's events through events_in_channel in the answer's own
-- order instead of probing event_tags once per event, and a filter of one
-- channel is read by comb_channel_events, whose plan is made once per
-- connection.

-- True when the h tags of stored event p_seq (its event_tags rows named
-- h) all name p_channel, and it has one exactly when p_channel is set.
CREATE FUNCTION comb_event_channel_ok(p_seq bigint, p_channel uuid)
RETURNS boolean LANGUAGE sql STABLE AS $$
	SELECT coalesce(bool_and(t.value = p_channel::text), true)
	       AND (p_channel IS NULL) = (count(*) = 0)
	  FROM event_tags t
	 WHERE t.event_seq = p_seq AND t.name = 'h'
$$;

DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM events e
		    WHERE NOT comb_event_channel_ok(e.seq, e.channel_id)) THEN
		RAISE EXCEPTION 'comb: stored events whose h tag does not name their channel (see migrations/0010_reads_planned_once.sql)';
	END IF;
END $$;

-- A channel's events in a plain filter's order (created_at descending,
-- then id), so that its newest are read first and a LIMIT stops the scan.
-- It serves everything events_by_channel served.
CREATE INDEX events_in_channel ON events (community_id, channel_id, created_at DESC, id);
DROP INDEX events_by_channel;

-- The stored events of channel p_channel of community p_community that
-- reader p_reader may read (the channel's read key, computed as in
-- comb_read_key with p_named the channels the filter names, is among
-- p_keys; otherwise none), neither deleted nor redacted, of a kind in
-- p_kinds (NULL: any), created from p_since to p_until, newest first and
-- then by id, at most p_limit (NULL: all), as (id, seq) (the relay
-- takes their bytes from its revision cache or a second statement). The
-- same answer as the general plain query of read/query.c for such a
-- filter, with a plan made once per connection: the channel's access is
-- one lookup, and its events come from events_in_channel in order. The
-- access is written out rather than asked of comb_channel_view, which is
-- not inlined here and then plans its body at every call (1,000 plain
-- REQs at once: 1.5 ms per statement against 0.2 to 0.4).
CREATE FUNCTION comb_channel_events(p_community bigint, p_reader text,
				    p_named uuid[], p_keys integer[],
				    p_channel uuid, p_kinds integer[],
				    p_since bigint, p_until bigint,
				    p_limit integer)
RETURNS TABLE (id text, seq bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
	RETURN QUERY
	SELECT e.id, e.seq FROM events e
	 WHERE e.community_id = p_community AND e.channel_id = p_channel
	   AND NOT e.deleted AND NOT e.redacted
	   AND (p_kinds IS NULL OR e.kind = ANY(p_kinds))
	   AND e.created_at >= p_since AND e.created_at <= p_until
	   AND EXISTS (SELECT FROM channels c
			LEFT JOIN members m ON m.community_id = c.community_id
			 AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
		       WHERE c.community_id = p_community AND c.id = p_channel
			 AND comb_read_key(c.visibility, c.is_dm, c.deleted,
					   c.archived, m.role,
					   c.id = ANY(p_named)) = ANY(p_keys))
	 ORDER BY e.created_at DESC, e.id
	 LIMIT p_limit;
END $$;

-- The next page of the listing of an incremental first read that names no
-- channel (read/incremental.c, initial_page): up to p_limit readable
-- current artifacts of community p_community after d p_after, by d, of a
-- type in p_types (NULL: any). Readable as in comb_read_key, the read key
-- computed with p_named, among p_keys; a channel with a ttl lists nothing.
-- STABLE, so it reads with the calling statement's snapshot, whose
-- horizon the caller takes in the same statement. The plan is the same
-- for every page (artifact_heads in d order, each head's channel and
-- membership looked up), so it is made once per connection: planning it
-- took longer than running it.
CREATE FUNCTION comb_heads_page(p_community bigint, p_reader text,
				p_keys integer[], p_named uuid[],
				p_types text[], p_after uuid, p_limit integer)
RETURNS TABLE (d uuid, accepted_seq bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
	RETURN QUERY
	SELECT h.d, h.accepted_seq FROM artifact_heads h
	  JOIN channels c ON c.community_id = h.community_id AND c.id = h.channel_id
	  LEFT JOIN members m ON m.community_id = c.community_id
	   AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
	 WHERE h.community_id = p_community AND h.d > p_after
	   AND NOT h.deleted AND NOT h.redacted AND c.ttl IS NULL
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,
			     m.role, c.id = ANY(p_named)) = ANY(p_keys)
	 ORDER BY h.d LIMIT p_limit;
END $$;
