-- Incremental reads (PROTOCOL.md section 8): what the change feed needs
-- beyond the stamps of 0001 and 0002.
--
-- To tell a reader who lost a channel at transaction L exactly which
-- artifacts to drop, we need to know which artifacts were in the channel
-- at L: those still there that entered before L, and those that left after
-- L having entered before it. Heads therefore remember when they entered
-- their home (home_since_xid) and move records when the artifact had
-- entered the source (from_since_xid). Writers that add artifacts to a
-- channel or take them out lock the channel row FOR SHARE before their
-- first write, and membership and policy changes lock it FOR UPDATE, so for
-- two such transactions xid order is commit order.
--
-- Policy changes are logged with the state before the change, so that a
-- reader who could never read a channel is never told about its artifacts.

ALTER TABLE artifact_heads ADD COLUMN home_since_xid xid8 NOT NULL
	DEFAULT pg_current_xact_id();
ALTER TABLE artifact_moves ADD COLUMN from_since_xid xid8;

-- A created head is stamped by the column default, a moved one here.
CREATE FUNCTION comb_stamp_artifact_home() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.home_since_xid := pg_current_xact_id();
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_heads_home_stamp BEFORE UPDATE ON artifact_heads
	FOR EACH ROW WHEN (NEW.channel_id IS DISTINCT FROM OLD.channel_id)
	EXECUTE FUNCTION comb_stamp_artifact_home();

-- The artifact entered the source by its latest earlier move into it, or
-- by its creation there.
CREATE FUNCTION comb_stamp_move_since() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	SELECT coalesce(
		(SELECT max(m.moved_xid) FROM artifact_moves m
		  WHERE m.community_id = NEW.community_id AND m.d = NEW.d
		    AND m.to_channel = NEW.from_channel),
		(SELECT r.accepted_xid FROM artifact_revisions r
		  WHERE r.community_id = NEW.community_id AND r.d = NEW.d
		    AND r.op = 'create'))
	INTO NEW.from_since_xid;
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_moves_since BEFORE INSERT ON artifact_moves
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_move_since();

CREATE TABLE channel_policy_log (
	community_id bigint NOT NULL,
	channel_id uuid NOT NULL,
	xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	was_visibility smallint NOT NULL,
	was_deleted boolean NOT NULL,
	was_ttl integer
);
CREATE INDEX channel_policy_log_changes ON channel_policy_log (community_id, xid, channel_id);
CREATE INDEX channel_policy_log_by_channel ON channel_policy_log (community_id, channel_id, xid);

CREATE FUNCTION comb_log_channel_policy() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.visibility IS DISTINCT FROM OLD.visibility
	   OR NEW.ttl IS DISTINCT FROM OLD.ttl
	   OR NEW.deleted IS DISTINCT FROM OLD.deleted THEN
		INSERT INTO channel_policy_log (community_id, channel_id,
						was_visibility, was_deleted, was_ttl)
		VALUES (OLD.community_id, OLD.id, OLD.visibility, OLD.deleted, OLD.ttl);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER channels_policy_log AFTER UPDATE ON channels
	FOR EACH ROW EXECUTE FUNCTION comb_log_channel_policy();

-- How a channel stands for a reader now: 0 out of view (unreadable, or
-- outside the #h scope), 1 readable, 2 readable but with a TTL (its
-- artifacts are never served incrementally).
CREATE FUNCTION comb_channel_view(p_community bigint, p_channel uuid,
				  p_reader text, p_keys integer[],
				  p_named uuid[], p_scoped boolean)
RETURNS integer LANGUAGE sql STABLE AS $$
	SELECT coalesce((
		SELECT CASE
			WHEN p_scoped AND NOT (c.id = ANY(p_named)) THEN 0
			WHEN comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,
					   m.role, c.id = ANY(p_named)) <> ALL(p_keys) THEN 0
			WHEN c.ttl IS NOT NULL THEN 2
			ELSE 1 END
		FROM channels c
		LEFT JOIN members m ON m.community_id = c.community_id
			AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
		WHERE c.community_id = p_community AND c.id = p_channel), 0)
$$;

-- Change-order scans over the whole community.
CREATE INDEX artifact_heads_changes_all ON artifact_heads (community_id, changed_xid, d);
CREATE INDEX artifact_moves_changes ON artifact_moves (community_id, moved_xid, d);
CREATE INDEX artifact_heads_by_home ON artifact_heads (community_id, channel_id, d);

-- The artifacts that were in a channel when transaction p_at committed:
-- those still there that entered before it, and those moved out after it
-- that had entered before it.
CREATE FUNCTION comb_artifacts_at(p_community bigint, p_channel uuid, p_at xid8)
RETURNS TABLE (d uuid) LANGUAGE sql STABLE AS $$
	SELECT h.d FROM artifact_heads h
	 WHERE h.community_id = p_community AND h.channel_id = p_channel
	   AND h.home_since_xid < p_at
	UNION
	SELECT m.d FROM artifact_moves m
	 WHERE m.community_id = p_community AND m.from_channel = p_channel
	   AND m.moved_xid > p_at AND m.from_since_xid < p_at
$$;

-- How a channel stood for a reader before a logged policy change, from the
-- logged state and the reader's current role (0, 1, 2 as comb_channel_view).
CREATE FUNCTION comb_channel_view_before(p_log channel_policy_log, p_reader text,
					 p_keys integer[], p_named uuid[],
					 p_scoped boolean)
RETURNS integer LANGUAGE sql STABLE AS $$
	SELECT coalesce((
		SELECT CASE
			WHEN p_scoped AND NOT (c.id = ANY(p_named)) THEN 0
			WHEN comb_read_key(p_log.was_visibility, c.is_dm, p_log.was_deleted,
					   c.archived, m.role, c.id = ANY(p_named)) <> ALL(p_keys) THEN 0
			WHEN p_log.was_ttl IS NOT NULL THEN 2
			ELSE 1 END
		FROM channels c
		LEFT JOIN members m ON m.community_id = c.community_id
			AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
		WHERE c.community_id = p_log.community_id AND c.id = p_log.channel_id), 0)
$$;

-- One page of changes for a reader, strictly after position (p_after_xid,
-- p_after_src, p_after_d) and below the horizon p_horizon, in position
-- order. Sources: 1 head changes in channels in view; 2 moves out of view;
-- 3 the reader's membership changes; 4 channel policy changes. `what` is
-- 'upsert' or a removal reason. Access is decided here, before the limit.
-- PL/pgSQL so that each connection plans the statement once and reuses the
-- plan: planning it costs ten times more than running it when nothing
-- changed.
CREATE FUNCTION comb_incremental_changes(
	p_community bigint, p_reader text, p_keys integer[], p_named uuid[],
	p_scoped boolean, p_types text[], p_after_xid xid8, p_after_src integer,
	p_after_d uuid, p_horizon xid8, p_limit integer)
RETURNS TABLE (xid xid8, src integer, d uuid, channel uuid, what text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH
heads AS (
	SELECT h.changed_xid AS xid, 1 AS src, h.d, h.channel_id AS channel,
	       CASE WHEN h.deleted THEN 'deleted'
		    WHEN h.redacted THEN 'redacted' ELSE 'upsert' END AS what
	  FROM artifact_heads h
	  JOIN channels c ON c.community_id = h.community_id AND c.id = h.channel_id
	  LEFT JOIN members m ON m.community_id = c.community_id
		AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
	 WHERE h.community_id = p_community
	   AND h.changed_xid >= p_after_xid AND h.changed_xid < p_horizon
	   AND (h.changed_xid, 1, h.d) > (p_after_xid, p_after_src, p_after_d)
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (NOT p_scoped OR c.id = ANY(p_named))
	   AND c.ttl IS NULL
	   AND comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,
			     m.role, c.id = ANY(p_named)) = ANY(p_keys)
	 ORDER BY h.changed_xid, h.d
	 LIMIT p_limit),
moves AS (
	SELECT mv.moved_xid AS xid, 2 AS src, mv.d, mv.from_channel AS channel,
	       CASE WHEN comb_channel_view(p_community, mv.to_channel, p_reader,
					   p_keys, p_named, p_scoped) = 2
		    THEN 'ttl' ELSE 'moved' END AS what
	  FROM artifact_moves mv
	  JOIN artifact_heads h ON h.community_id = mv.community_id AND h.d = mv.d
	 WHERE mv.community_id = p_community
	   AND mv.moved_xid >= p_after_xid AND mv.moved_xid < p_horizon
	   AND (mv.moved_xid, 2, mv.d) > (p_after_xid, p_after_src, p_after_d)
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (NOT p_scoped OR mv.from_channel = ANY(p_named))
	   AND comb_channel_view(p_community, mv.to_channel, p_reader, p_keys,
				 p_named, p_scoped) <> 1
	   AND (comb_channel_view(p_community, mv.from_channel, p_reader, p_keys,
				  p_named, p_scoped) = 1
		-- or the reader lost the source after the move, so may hold it
		OR EXISTS (SELECT 1 FROM members x
			    WHERE x.community_id = p_community
			      AND x.channel_id = mv.from_channel
			      AND x.pubkey = p_reader AND x.changed_xid > mv.moved_xid)
		OR EXISTS (SELECT 1 FROM channel_policy_log pl
			    WHERE pl.community_id = p_community
			      AND pl.channel_id = mv.from_channel
			      AND pl.xid > mv.moved_xid
			      AND comb_channel_view_before(pl, p_reader, p_keys,
							   p_named, p_scoped) = 1))
	 ORDER BY mv.moved_xid, mv.d
	 LIMIT p_limit),
grants AS (
	-- membership changes (src 3) and policy changes (src 4) of channels,
	-- with how the channel stands now and whether it stood otherwise before
	SELECT mb.changed_xid AS xid, 3 AS src, mb.channel_id AS channel,
	       comb_channel_view(p_community, mb.channel_id, p_reader, p_keys,
				 p_named, p_scoped) AS now_view,
	       -1 AS was_view
	  FROM members mb
	 WHERE mb.community_id = p_community AND mb.pubkey = p_reader
	   AND mb.changed_xid >= p_after_xid AND mb.changed_xid < p_horizon
	   AND (NOT p_scoped OR mb.channel_id = ANY(p_named))
	UNION ALL
	SELECT pl.xid, 4, pl.channel_id,
	       comb_channel_view(p_community, pl.channel_id, p_reader, p_keys,
				 p_named, p_scoped),
	       comb_channel_view_before(pl, p_reader, p_keys, p_named, p_scoped)
	  FROM channel_policy_log pl
	 WHERE pl.community_id = p_community
	   AND pl.xid >= p_after_xid AND pl.xid < p_horizon
	   AND (NOT p_scoped OR pl.channel_id = ANY(p_named))),
gained AS (
	SELECT g.xid, g.src, h.d, h.channel_id AS channel, 'upsert' AS what
	  FROM grants g
	  JOIN artifact_heads h ON h.community_id = p_community
		AND h.channel_id = g.channel
	 WHERE g.now_view = 1 AND g.was_view <> 1
	   AND NOT h.deleted AND NOT h.redacted
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (g.xid, g.src, h.d) > (p_after_xid, p_after_src, p_after_d)
	 ORDER BY g.xid, g.src, h.d
	 LIMIT p_limit),
lost AS (
	SELECT g.xid, g.src, a.d, g.channel,
	       CASE WHEN g.now_view = 2 THEN 'ttl' ELSE 'access' END AS what
	  FROM grants g
	 CROSS JOIN LATERAL comb_artifacts_at(p_community, g.channel, g.xid) a
	  JOIN artifact_heads h ON h.community_id = p_community AND h.d = a.d
	 WHERE g.now_view <> 1 AND (g.src = 3 OR g.was_view = 1)
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (g.xid, g.src, a.d) > (p_after_xid, p_after_src, p_after_d)
	 ORDER BY g.xid, g.src, a.d
	 LIMIT p_limit)
SELECT * FROM (
	SELECT * FROM heads UNION ALL SELECT * FROM moves
	UNION ALL SELECT * FROM gained UNION ALL SELECT * FROM lost) page
ORDER BY page.xid, page.src, page.d
LIMIT p_limit;
END
$$;
