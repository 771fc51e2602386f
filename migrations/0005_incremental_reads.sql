-- Incremental reads at the limit (docs/benchmarks.md): a cheap exact test
-- for "nothing changed", and the change query with its plan fixed per
-- connection and no per-row function calls in the `moves` branch.
--
-- Why the test is needed: a cursor is left at the horizon,
-- pg_snapshot_xmin(pg_current_snapshot()), and that horizon moves whenever
-- any transaction anywhere in the cluster is assigned an id, even one
-- that writes nothing a reader could see. comb-capture's heartbeat is
-- such a transaction (a pg_notify every COMB_CAPTURE_HEARTBEAT_MS, and a
-- NOTIFY assigns a transaction id at commit), so "the horizon did not
-- move" almost never holds for long.

-- True when comb_incremental_changes has no item for this reader at any
-- position from p_after_xid (inclusive) up to p_horizon (exclusive). Every
-- item of that function takes its position from one of four stamps: a
-- head's changed_xid (source 1), a move's moved_xid (2), the reader's
-- membership changed_xid (3) or a policy log entry's xid (4), each in this
-- community. When none of the four lies in the range, no item does,
-- whatever the reader's access; one index probe each. PL/pgSQL so that
-- each connection plans the probes once (a SQL function that is not
-- inlined is planned again on every call).
CREATE FUNCTION comb_incremental_unchanged(p_community bigint, p_reader text,
					   p_after_xid xid8, p_horizon xid8)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN NOT EXISTS (SELECT 1 FROM artifact_heads h
			    WHERE h.community_id = p_community
			      AND h.changed_xid >= p_after_xid AND h.changed_xid < p_horizon)
	   AND NOT EXISTS (SELECT 1 FROM artifact_moves mv
			    WHERE mv.community_id = p_community
			      AND mv.moved_xid >= p_after_xid AND mv.moved_xid < p_horizon)
	   AND NOT EXISTS (SELECT 1 FROM members mb
			    WHERE mb.community_id = p_community AND mb.pubkey = p_reader
			      AND mb.changed_xid >= p_after_xid AND mb.changed_xid < p_horizon)
	   AND NOT EXISTS (SELECT 1 FROM channel_policy_log pl
			    WHERE pl.community_id = p_community
			      AND pl.xid >= p_after_xid AND pl.xid < p_horizon);
END
$$;

-- The change query of 0004 with two changes, same items in the same order:
-- the `moves` branch joins the source and destination channels (and the
-- reader's membership of each) instead of calling comb_channel_view three
-- times per candidate row, as the `heads` branch always did; the CASE
-- expressions below are comb_channel_view's, over the joined rows. And the
-- plan is generic (planned once per connection, whatever the parameters):
-- every branch is an index range scan on (community, xid) whose shape does
-- not depend on the values, and planning cost ten times the execution of a
-- read that finds little. ROWS 100 (instead of the default 1000) lets the
-- caller fetch the upserted revisions by index rather than hashing every
-- head of the community.
CREATE OR REPLACE FUNCTION comb_incremental_changes(
	p_community bigint, p_reader text, p_keys integer[], p_named uuid[],
	p_scoped boolean, p_types text[], p_after_xid xid8, p_after_src integer,
	p_after_d uuid, p_horizon xid8, p_limit integer)
RETURNS TABLE (xid xid8, src integer, d uuid, channel uuid, what text)
LANGUAGE plpgsql STABLE ROWS 100 SET plan_cache_mode = force_generic_plan AS $$
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
move_views AS (
	-- how the destination and the source stand for the reader now
	-- (0, 1, 2 as comb_channel_view)
	SELECT mv.moved_xid, mv.d, mv.from_channel,
	       CASE WHEN ct.id IS NULL THEN 0
		    WHEN p_scoped AND NOT (ct.id = ANY(p_named)) THEN 0
		    WHEN comb_read_key(ct.visibility, ct.is_dm, ct.deleted, ct.archived,
				       mt.role, ct.id = ANY(p_named)) <> ALL(p_keys) THEN 0
		    WHEN ct.ttl IS NOT NULL THEN 2
		    ELSE 1 END AS to_view,
	       CASE WHEN cf.id IS NULL THEN 0
		    WHEN p_scoped AND NOT (cf.id = ANY(p_named)) THEN 0
		    WHEN comb_read_key(cf.visibility, cf.is_dm, cf.deleted, cf.archived,
				       mf.role, cf.id = ANY(p_named)) <> ALL(p_keys) THEN 0
		    WHEN cf.ttl IS NOT NULL THEN 2
		    ELSE 1 END AS from_view
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
	       CASE WHEN v.to_view = 2 THEN 'ttl' ELSE 'moved' END AS what
	  FROM move_views v
	 WHERE v.to_view <> 1
	   AND (v.from_view = 1
		-- or the reader lost the source after the move, so may hold it
		OR EXISTS (SELECT 1 FROM members x
			    WHERE x.community_id = p_community
			      AND x.channel_id = v.from_channel
			      AND x.pubkey = p_reader AND x.changed_xid > v.moved_xid)
		OR EXISTS (SELECT 1 FROM channel_policy_log pl
			    WHERE pl.community_id = p_community
			      AND pl.channel_id = v.from_channel
			      AND pl.xid > v.moved_xid
			      AND comb_channel_view_before(pl, p_reader, p_keys,
							   p_named, p_scoped) = 1))
	 ORDER BY v.moved_xid, v.d
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
	-- every head of the channel, the deleted and redacted ones as their
	-- removals: an earlier read may have passed their change while the
	-- channel was out of view (a later loss already committed, xid above
	-- its horizon) and a grant since then undid the loss
	SELECT g.xid, g.src, h.d, h.channel_id AS channel,
	       CASE WHEN h.deleted THEN 'deleted'
		    WHEN h.redacted THEN 'redacted' ELSE 'upsert' END AS what
	  FROM grants g
	  JOIN artifact_heads h ON h.community_id = p_community
		AND h.channel_id = g.channel
	 WHERE g.now_view = 1 AND g.was_view <> 1
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
