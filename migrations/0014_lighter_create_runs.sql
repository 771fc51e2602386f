-- Two costs of a run of artifact creates that buy nothing when every
-- create of the run is stored, as in a burst of new artifacts
-- (docs/benchmarks.md, "ingest": PostgreSQL's time per create, statement
-- by statement):
--
-- comb_pick (0007) picked the stored writes' elements out of each of the
-- run's seven arrays with a SQL function, which PostgreSQL plans again at
-- every call and which rebuilt each array, 4.9 KB revisions included,
-- even when it picked every element: about a twentieth of PostgreSQL's
-- time in a burst of creates. It is now PL/pgSQL (its statement planned
-- once per session) and gives the array back as it is when the positions
-- asked for are all of them, in order; any other pick is made as before.
--
-- artifact_heads_notify (0003) ran its PL/pgSQL function once per new
-- head. New heads are now announced by one statement-level trigger per
-- INSERT that raises the same notification for each inserted row; updates
-- and deletions keep the row trigger, unchanged. The notifications, their
-- payloads and their delivery (at commit, once per distinct payload) are
-- those of 0003.

CREATE OR REPLACE FUNCTION comb_pick(p_from anyarray, p_at integer[])
RETURNS anyarray LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF array_lower(p_from, 1) = 1 AND cardinality(p_at) = cardinality(p_from)
	   AND p_at = ARRAY(SELECT generate_series(1, cardinality(p_from))) THEN
		RETURN p_from;
	END IF;
	RETURN (SELECT array_agg(p_from[a.i] ORDER BY a.k)
		  FROM unnest(p_at) WITH ORDINALITY AS a(i, k));
END $$;

CREATE FUNCTION comb_notify_artifact_heads_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM comb_notify('head', n.community_id, n.channel_id, n.d, NULL,
			    n.revision_id, NULL)
	   FROM inserted_heads n;
	RETURN NULL;
END $$;

DROP TRIGGER artifact_heads_notify ON artifact_heads;
CREATE TRIGGER artifact_heads_notify AFTER UPDATE OR DELETE
	ON artifact_heads FOR EACH ROW EXECUTE FUNCTION comb_notify_artifact_head();
CREATE TRIGGER artifact_heads_notify_inserted AFTER INSERT ON artifact_heads
	REFERENCING NEW TABLE AS inserted_heads
	FOR EACH STATEMENT EXECUTE FUNCTION comb_notify_artifact_heads_inserted();
