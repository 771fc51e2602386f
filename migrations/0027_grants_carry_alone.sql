-- A head change the channel's later grant carries comes once.
--
-- Since 0026 a grant (a membership change, source 3; a policy change that
-- brought the channel into view, 4; the reader made a community admin, 5)
-- carries every head of the channel not changed since it, however old:
-- an earlier read may have passed a head's change while the channel was
-- out of view. A read whose horizon (an older transaction still open) lay
-- between a head's change and a later grant of its channel saw the
-- channel readable (the grant committed) and sent the head by its own
-- change (source 1); the next read, past the grant, sent it again with the
-- grant: the same revision twice to a client that stored each answer with
-- its cursor (docs/protocol.md 7.3 named it as the one repeat left after a
-- first read).
--
-- A head change is now left out when a later grant of its channel for
-- this reader exists: the reader's membership row changed after it, a
-- channel policy change after it brought the channel into view, or the
-- reader was made a community admin after it. That grant lies strictly
-- after the head's change, so after every cursor that could have passed
-- over the change, and carries the head (changed before it, readable now:
-- the same conditions), once the horizon passes it. Should the channel
-- leave the reader's view again before then, the grant carries nothing and
-- the loss answers for it, as it would have for the head change: an
-- `access` removal of an artifact the client may never have had, which
-- the protocol allows. Nothing else changes.

CREATE OR REPLACE FUNCTION comb_incremental_changes(
	p_community bigint, p_reader text, p_keys integer[], p_named uuid[],
	p_scoped boolean, p_types text[], p_after_xid xid8, p_after_src integer,
	p_after_d uuid, p_horizon xid8, p_limit integer)
RETURNS TABLE (xid xid8, src integer, d uuid, channel uuid, what text,
	       seq bigint)
LANGUAGE plpgsql STABLE ROWS 100 SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH
heads AS (
	SELECT h.changed_xid AS xid, 1 AS src, h.d, h.channel_id AS channel,
	       CASE WHEN h.deleted THEN 'deleted'
		    WHEN h.redacted THEN 'redacted' ELSE 'upsert' END AS what,
	       CASE WHEN NOT h.deleted AND NOT h.redacted THEN h.accepted_seq END AS seq
	  FROM artifact_heads h
	  JOIN channels c ON c.community_id = h.community_id AND c.id = h.channel_id
	  -- the reader's membership row, active or not: its change is a grant
	  LEFT JOIN members m ON m.community_id = c.community_id
		AND m.channel_id = c.id AND m.pubkey = p_reader
	 WHERE h.community_id = p_community
	   AND h.changed_xid >= p_after_xid AND h.changed_xid < p_horizon
	   AND (h.changed_xid, 1, h.d) > (p_after_xid, p_after_src, p_after_d)
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (NOT p_scoped OR c.id = ANY(p_named))
	   AND c.ttl IS NULL
	   AND comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,
			     CASE WHEN m.active THEN m.role END,
			     c.id = ANY(p_named)) = ANY(p_keys)
	   -- a later grant of the channel (gained, below) carries the head:
	   -- it comes with the grant alone, not by its own change as well
	   AND NOT coalesce(m.changed_xid > h.changed_xid, false)
	   AND NOT EXISTS (SELECT 1 FROM channel_policy_log pl
			    WHERE pl.community_id = p_community
			      AND pl.channel_id = c.id AND pl.xid > h.changed_xid
			      AND comb_channel_view_before(pl, p_reader, p_keys,
							   p_named, p_scoped) <> 1)
	   AND h.changed_xid >= coalesce(
		(SELECT max(al.xid) FROM community_admin_log al
		  WHERE al.community_id = p_community AND al.pubkey = p_reader
		    AND al.admin), '0'::xid8)
	 ORDER BY h.changed_xid, h.d
	 LIMIT p_limit),
move_views AS (
	-- how the destination and the source stand for the reader now
	SELECT mv.moved_xid, mv.d, mv.from_channel,
	       comb_view_of(ct.id, ct.visibility, ct.is_dm, ct.deleted,
			    ct.archived, ct.ttl, mt.role, p_keys, p_named, p_scoped) AS to_view,
	       comb_view_of(cf.id, cf.visibility, cf.is_dm, cf.deleted,
			    cf.archived, cf.ttl, mf.role, p_keys, p_named, p_scoped) AS from_view
	  FROM artifact_moves mv
	  JOIN artifact_heads h ON h.community_id = mv.community_id AND h.d = mv.d
	  LEFT JOIN channels ct ON ct.community_id = mv.community_id
		AND ct.id = mv.to_channel
	  LEFT JOIN members mt ON mt.community_id = mv.community_id
		AND mt.channel_id = mv.to_channel AND mt.pubkey = p_reader AND mt.active
	  LEFT JOIN channels cf ON cf.community_id = mv.community_id
		AND cf.id = mv.from_channel
	  LEFT JOIN members mf ON mf.community_id = mv.community_id
		AND mf.channel_id = mv.from_channel AND mf.pubkey = p_reader AND mf.active
	 WHERE mv.community_id = p_community
	   AND mv.moved_xid >= p_after_xid AND mv.moved_xid < p_horizon
	   AND (mv.moved_xid, 2, mv.d) > (p_after_xid, p_after_src, p_after_d)
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (NOT p_scoped OR mv.from_channel = ANY(p_named))),
moves AS (
	SELECT v.moved_xid AS xid, 2 AS src, v.d, v.from_channel AS channel,
	       CASE WHEN v.to_view = 2 THEN 'ttl' ELSE 'moved' END AS what,
	       NULL::bigint AS seq
	  FROM move_views v
	 WHERE v.to_view <> 1
	   AND (v.from_view = 1
		-- or the reader lost the source after the move, so may hold it
		OR EXISTS (SELECT 1 FROM members x
			    WHERE x.community_id = p_community
			      AND x.channel_id = v.from_channel
			      AND x.pubkey = p_reader AND x.changed_xid > v.moved_xid)
		OR EXISTS (SELECT 1 FROM community_admin_log al
			    WHERE al.community_id = p_community
			      AND al.pubkey = p_reader AND NOT al.admin
			      AND al.xid > v.moved_xid)
		OR EXISTS (SELECT 1 FROM channel_policy_log pl
			    WHERE pl.community_id = p_community
			      AND pl.channel_id = v.from_channel
			      AND pl.xid > v.moved_xid
			      AND comb_channel_view_before(pl, p_reader, p_keys,
							   p_named, p_scoped) = 1))
	 ORDER BY v.moved_xid, v.d
	 LIMIT p_limit),
grants AS (
	-- membership changes (src 3), policy changes (src 4) and admin
	-- changes (src 5) of channels,
	-- with how the channel stands now for the reader and whether it
	-- stood otherwise before
	SELECT mb.changed_xid AS xid, 3 AS src, mb.channel_id AS channel,
	       comb_view_of(c.id, c.visibility, c.is_dm, c.deleted,
			    c.archived, c.ttl, CASE WHEN mb.active THEN mb.role END,
			    p_keys, p_named, p_scoped) AS now_view,
	       -1 AS was_view
	  FROM members mb
	  LEFT JOIN channels c ON c.community_id = mb.community_id
		AND c.id = mb.channel_id
	 WHERE mb.community_id = p_community AND mb.pubkey = p_reader
	   AND mb.changed_xid >= p_after_xid AND mb.changed_xid < p_horizon
	   AND (NOT p_scoped OR mb.channel_id = ANY(p_named))
	UNION ALL
	SELECT pl.xid, 4, pl.channel_id,
	       comb_view_of(c.id, c.visibility, c.is_dm, c.deleted,
			    c.archived, c.ttl, m.role, p_keys, p_named, p_scoped),
	       comb_channel_view_before(pl, p_reader, p_keys, p_named, p_scoped)
	  FROM channel_policy_log pl
	  LEFT JOIN channels c ON c.community_id = pl.community_id
		AND c.id = pl.channel_id
	  LEFT JOIN members m ON m.community_id = pl.community_id
		AND m.channel_id = pl.channel_id AND m.pubkey = p_reader AND m.active
	 WHERE pl.community_id = p_community
	   AND pl.xid >= p_after_xid AND pl.xid < p_horizon
	   AND (NOT p_scoped OR pl.channel_id = ANY(p_named))
	UNION ALL
	-- the reader made or unmade a community admin (src 5): every channel
	-- of the community, as if it had been out of view before a grant and
	-- in view before a removal
	SELECT al.xid, 5, c.id,
	       comb_view_of(c.id, c.visibility, c.is_dm, c.deleted,
			    c.archived, c.ttl, m.role, p_keys, p_named, p_scoped),
	       CASE WHEN al.admin THEN 0 ELSE 1 END
	  FROM community_admin_log al
	  JOIN channels c ON c.community_id = al.community_id
	  LEFT JOIN members m ON m.community_id = c.community_id
		AND m.channel_id = c.id AND m.pubkey = p_reader AND m.active
	 WHERE al.community_id = p_community AND al.pubkey = p_reader
	   AND al.xid >= p_after_xid AND al.xid < p_horizon
	   AND (NOT p_scoped OR c.id = ANY(p_named))),
gained AS (
	-- every head of the channel, the deleted and redacted ones as their
	-- removals: an earlier read may have passed their change while the
	-- channel was out of view (a later loss already committed, xid above
	-- its horizon) and a grant since then undid the loss
	SELECT g.xid, g.src, h.d, h.channel_id AS channel,
	       CASE WHEN h.deleted THEN 'deleted'
		    WHEN h.redacted THEN 'redacted' ELSE 'upsert' END AS what,
	       CASE WHEN NOT h.deleted AND NOT h.redacted THEN h.accepted_seq END AS seq
	  FROM grants g
	  JOIN artifact_heads h ON h.community_id = p_community
		AND h.channel_id = g.channel
	 WHERE g.now_view = 1 AND g.was_view <> 1
	   -- as it stood at the change: a head changed since (above the
	   -- horizon, or after the change in a later page) comes by its own
	   -- change (source 1), and came twice when it also came here
	   AND h.changed_xid < g.xid
	   AND (p_types IS NULL OR h.type = ANY(p_types))
	   AND (g.xid, g.src, h.d) > (p_after_xid, p_after_src, p_after_d)
	 ORDER BY g.xid, g.src, h.d
	 LIMIT p_limit),
lost AS (
	SELECT g.xid, g.src, a.d, g.channel,
	       CASE WHEN g.now_view = 2 THEN 'ttl' ELSE 'access' END AS what,
	       NULL::bigint AS seq
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
