-- comb:no-transaction
-- An artifact revision is stored once: its event's row (events.d, type,
-- op and prev) instead of its event plus a ledger row in
-- artifact_revisions (docs/benchmarks.md, "A revision stored once";
-- issue 38). A create writes one row and two index entries fewer and one
-- index entry more (events_revisions): 16.2 WAL records instead of 18.2.
--
-- Online (docs/operations.md, "Upgrading to 0025"): run outside a
-- transaction, one step at a time (comb-admin migrate sends each part
-- between `-- comb:step` lines on its own); every step may run again after
-- a failure. Relays of the previous release keep working throughout and
-- after: until step 6 they read the ledger table, which stays whole, and
-- from step 6 on a view of the same name over events.
--
-- 1. events gains d, type, op and prev, NULL but for kind-45010
--    revisions, with their checks NOT VALID (catalog changes only, no
--    rewrite or scan; at most 5 s of waiting for the table's lock).
-- 2. Until step 6, each new ledger row's d, type, op and prev are copied
--    onto its event by a trigger, in the writer's transaction
--    (comb_revision_onto_event).
-- 3. A barrier: a SHARE lock on artifact_revisions, granted once every
--    write that started before step 2 has ended (at most 5 s of waiting),
--    so that step 4 sees every ledger row the trigger did not copy.
-- 4. The revisions stored before are copied onto their events, 5,000
--    event seqs a transaction, so that no write waits on more than one
--    batch.
-- 5. events_revisions (community_id, d, seq) WHERE d IS NOT NULL is built
--    CONCURRENTLY, as events_revisions_building until step 6 names it
--    (one a failed attempt left is dropped first, also CONCURRENTLY), the
--    checks are validated (a scan that does not block writes), and the
--    migration fails unless the index is valid and every ledger row is on
--    its event.
-- 6. One transaction (at most 5 s of waiting for the ledger's lock): the
--    write functions store a revision in its event alone, the trigger
--    that stamps a move's origin reads events, and artifact_revisions
--    becomes a view of the revisions in events, which relays of the
--    previous release read, lock and mark redacted through. A row
--    inserted into the view is copied onto its event by the same
--    function as in step 2: a write that began with the previous write
--    function before the swap and reaches its ledger INSERT after it
--    stores its revision whole. The ledger table is kept as
--    artifact_revisions_0024 until step 7.
-- 7. The ledger table is dropped (and an index a run again after step 6
--    built), and events analyzed.
DO $$
BEGIN
	SET LOCAL lock_timeout = '5s';
	ALTER TABLE events ADD COLUMN IF NOT EXISTS d uuid,
		ADD COLUMN IF NOT EXISTS type text,
		ADD COLUMN IF NOT EXISTS op text,
		ADD COLUMN IF NOT EXISTS prev text;
	IF NOT EXISTS (SELECT 1 FROM pg_constraint
			WHERE conname = 'events_revision_check') THEN
		ALTER TABLE events ADD CONSTRAINT events_revision_check CHECK (
			(d IS NULL) = (type IS NULL) AND (d IS NULL) = (op IS NULL)
			AND (prev IS NULL OR d IS NOT NULL)) NOT VALID,
		ADD CONSTRAINT events_op_check CHECK (
			op IN ('create', 'update', 'move', 'delete', 'restore')) NOT VALID,
		ADD CONSTRAINT events_prev_check CHECK (
			prev ~ '^[0-9a-f]{64}$') NOT VALID;
	END IF;
END $$;
-- comb:step
-- A revision's ledger row, onto its event (stored before it by the same
-- transaction).
CREATE OR REPLACE FUNCTION comb_revision_onto_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE events e SET d = NEW.d, type = NEW.type, op = NEW.op, prev = NEW.prev
	 WHERE e.community_id = NEW.community_id AND e.id = NEW.id;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'comb: revision % has no event', NEW.id;
	END IF;
	RETURN NEW;
END $$;
-- comb:step
DO $$
BEGIN
	-- A view already (a run again after step 6): nothing to copy.
	IF (SELECT c.relkind FROM pg_class c
	     WHERE c.oid = to_regclass('artifact_revisions')) = 'r' THEN
		SET LOCAL lock_timeout = '5s';
		CREATE OR REPLACE TRIGGER artifact_revisions_copied
			AFTER INSERT ON artifact_revisions
			FOR EACH ROW EXECUTE FUNCTION comb_revision_onto_event();
	END IF;
END $$;
-- comb:step
BEGIN;
SET LOCAL lock_timeout = '5s';
LOCK TABLE artifact_revisions IN SHARE MODE;
COMMIT;
-- comb:step
DO $$
DECLARE
	v_from bigint := 0;
	v_max bigint;
BEGIN
	SELECT coalesce(max(r.seq), 0) INTO v_max FROM artifact_revisions r;
	WHILE v_from <= v_max LOOP
		UPDATE events e
		   SET d = r.d, type = r.type, op = r.op, prev = r.prev
		  FROM artifact_revisions r
		 WHERE e.seq >= v_from AND e.seq < v_from + 5000
		   AND e.kind = 45010 AND e.d IS NULL
		   AND r.community_id = e.community_id AND r.id = e.id;
		v_from := v_from + 5000;
		COMMIT;
	END LOOP;
END $$;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS events_revisions_building;
-- comb:step
CREATE INDEX CONCURRENTLY events_revisions_building ON events (community_id, d, seq)
	WHERE d IS NOT NULL;
-- comb:step
ALTER TABLE events VALIDATE CONSTRAINT events_revision_check,
	VALIDATE CONSTRAINT events_op_check,
	VALIDATE CONSTRAINT events_prev_check;
-- comb:step
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_index i
			WHERE i.indexrelid = to_regclass('events_revisions_building')
			  AND i.indisvalid AND i.indisready) THEN
		RAISE EXCEPTION 'events_revisions_building is not valid';
	END IF;
	IF EXISTS (SELECT 1 FROM artifact_revisions r
		    WHERE NOT EXISTS (SELECT 1 FROM events e
				       WHERE e.community_id = r.community_id
					 AND e.id = r.id AND e.d = r.d
					 AND e.type = r.type AND e.op = r.op
					 AND e.prev IS NOT DISTINCT FROM r.prev)) THEN
		RAISE EXCEPTION 'artifact revisions whose events lack their d, type, op or prev';
	END IF;
END $$;
-- comb:step
BEGIN;
SET LOCAL lock_timeout = '5s';
DO $$
BEGIN
	IF (SELECT c.relkind FROM pg_class c
	     WHERE c.oid = to_regclass('artifact_revisions')) = 'r' THEN
		ALTER TABLE artifact_revisions RENAME TO artifact_revisions_0024;
		-- The revisions as the ledger held them, for relays of the
		-- previous release.
		CREATE VIEW artifact_revisions AS
		SELECT e.community_id, e.id, e.d, e.seq, e.channel_id, e.type,
		       e.op, e.prev, e.redacted, e.xid AS accepted_xid
		  FROM events e WHERE e.d IS NOT NULL;
		CREATE TRIGGER artifact_revisions_onto_events
			INSTEAD OF INSERT ON artifact_revisions
			FOR EACH ROW EXECUTE FUNCTION comb_revision_onto_event();
	END IF;
	IF to_regclass('events_revisions') IS NULL THEN
		ALTER INDEX events_revisions_building RENAME TO events_revisions;
	END IF;
END $$;

-- comb_artifact_write (0018) as it was, but for the revision: stored as
-- its event's row, by a plain INSERT with the event's single-letter tags
-- but d and h (comb_store_event took the same path for a new kind-45010
-- event), and looked up in events.
CREATE OR REPLACE FUNCTION comb_artifact_write(
	p_community bigint, p_id text, p_pubkey text, p_created_at bigint,
	p_raw text, p_tags json, p_d uuid, p_h uuid, p_type text, p_op text,
	p_prev text, p_root text, p_fresh boolean, p_write_keys integer[],
	p_delete_keys integer[],
	OUT outcome integer, OUT inserted boolean, OUT source uuid,
	OUT replaced text)
LANGUAGE plpgsql AS $$
DECLARE
	v_admin boolean;
	v_head artifact_heads%ROWTYPE;
	v_home integer;
	v_seq bigint;
BEGIN
	inserted := false;
	IF EXISTS (SELECT 1 FROM events r
		    WHERE r.community_id = p_community AND r.id = p_id
		      AND r.d IS NOT NULL) THEN
		outcome := 1;
		RETURN;
	END IF;
	IF NOT p_fresh THEN
		outcome := 3;
		RETURN;
	END IF;
	IF p_op IN ('create', 'move') THEN
		IF p_op = 'move' THEN
			SELECT h.channel_id INTO source FROM artifact_heads h
			 WHERE h.community_id = p_community AND h.d = p_d;
		END IF;
		PERFORM 1 FROM channels c
		 WHERE c.community_id = p_community
		   AND c.id IN (p_h, source)
		 ORDER BY c.id FOR SHARE;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtextextended(
		'comb.artifact:' || p_community || ':' || p_d, 0));
	-- A concurrent copy of this very event may have won the lock.
	IF EXISTS (SELECT 1 FROM events r
		    WHERE r.community_id = p_community AND r.id = p_id
		      AND r.d IS NOT NULL) THEN
		outcome := 2;
		RETURN;
	END IF;
	v_admin := EXISTS (SELECT 1 FROM community_admins a
			    WHERE a.community_id = p_community
			      AND a.pubkey = p_pubkey);
	SELECT * INTO v_head FROM artifact_heads h
	 WHERE h.community_id = p_community AND h.d = p_d FOR UPDATE;
	-- Moved meanwhile: lock the source it has now.
	IF p_op = 'move' AND v_head.d IS NOT NULL
	   AND v_head.channel_id IS DISTINCT FROM source THEN
		PERFORM 1 FROM channels c
		 WHERE c.community_id = p_community AND c.id = v_head.channel_id
		   FOR SHARE;
	END IF;
	IF p_op = 'create' THEN
		IF NOT coalesce(comb_write_key(p_community, p_h, p_pubkey, v_admin)
				= ANY (p_write_keys), false) THEN
			outcome := 4;
			RETURN;
		END IF;
		IF v_head.d IS NOT NULL THEN
			outcome := 5;
			RETURN;
		END IF;
	ELSE
		IF v_head.d IS NULL THEN
			outcome := 6;
			RETURN;
		END IF;
		v_home := comb_write_key(p_community, v_head.channel_id, p_pubkey,
					 v_admin);
		IF NOT coalesce(v_home = ANY (p_write_keys), false) THEN
			outcome := 6;
			RETURN;
		END IF;
		IF p_prev IS DISTINCT FROM v_head.revision_id THEN
			outcome := 7;
			RETURN;
		END IF;
		IF p_type <> v_head.type THEN
			outcome := 8;
			RETURN;
		END IF;
		IF (p_op = 'restore') <> v_head.deleted THEN
			outcome := 9;
			RETURN;
		END IF;
		IF (p_op = 'move') = (p_h = v_head.channel_id) THEN
			outcome := 10;
			RETURN;
		END IF;
		IF p_op = 'move' AND NOT coalesce(comb_write_key(p_community, p_h,
				p_pubkey, v_admin) = ANY (p_write_keys), false) THEN
			outcome := 4;
			RETURN;
		END IF;
		IF p_op IN ('delete', 'restore') AND NOT coalesce(
			v_home + ((p_pubkey = v_head.creator)::integer << 9)
				= ANY (p_delete_keys), false) THEN
			outcome := 11;
			RETURN;
		END IF;
	END IF;
	-- A new or changed root must be a message in h (for a move, in the
	-- destination, changed or not); a delete may only repeat the stored
	-- root, which it keeps.
	IF p_root IS NOT NULL THEN
		IF p_op = 'delete' THEN
			IF p_root IS DISTINCT FROM v_head.root THEN
				outcome := 12;
				RETURN;
			END IF;
		ELSIF (p_op IN ('create', 'move') OR p_root IS DISTINCT FROM v_head.root)
		      AND NOT EXISTS (SELECT 1 FROM events e
				       WHERE e.community_id = p_community
					 AND e.id = p_root AND e.kind = 9
					 AND e.channel_id = p_h
					 AND NOT e.deleted AND NOT e.redacted) THEN
			outcome := 12;
			RETURN;
		END IF;
	END IF;
	IF p_op = 'delete' THEN
		p_root := v_head.root;
	END IF;

	-- The revision is its event's row. It cannot be stored already: a
	-- kind-45010 event is only ever stored as a revision, whose absence
	-- the check above saw under the lock on its d.
	INSERT INTO events (community_id, id, pubkey, created_at, kind,
			    channel_id, raw, d, type, op, prev)
	VALUES (p_community, p_id, p_pubkey, p_created_at, 45010, p_h, p_raw,
		p_d, p_type, p_op, p_prev)
	RETURNING events.seq INTO v_seq;
	inserted := true;
	INSERT INTO event_tags (community_id, event_seq, name, value)
	SELECT p_community, v_seq, t->>0, t->>1 FROM json_array_elements(p_tags) t
	 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1
	   AND t->>0 NOT IN ('d', 'h');
	IF p_op = 'create' THEN
		INSERT INTO artifact_heads (community_id, d, revision_id,
					    accepted_seq, channel_id, type,
					    creator, root, tags)
		VALUES (p_community, p_d, p_id, v_seq, p_h, p_type, p_pubkey,
			p_root, comb_head_tags(p_tags));
	ELSE
		UPDATE artifact_heads h
		   SET revision_id = p_id, accepted_seq = v_seq, channel_id = p_h,
		       deleted = (p_op = 'delete'), root = p_root, redacted = false,
		       tags = comb_head_tags(p_tags)
		 WHERE h.community_id = p_community AND h.d = p_d;
	END IF;
	source := v_head.channel_id;
	replaced := v_head.revision_id;
	outcome := 0;
END $$;

-- comb_artifact_create_run (0023) as it was, but for the revisions: each
-- stored as its event's row, and looked up in events.
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
		WHEN EXISTS (SELECT 1 FROM events r
			      WHERE r.community_id = w.community AND r.id = w.id
				AND r.d IS NOT NULL)
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
		-- creates of one run have distinct d, hence distinct ids. Each
		-- is its revision's row; their single-letter tags but d and h
		-- go to event_tags.
		WITH stored AS (
			INSERT INTO events (community_id, id, pubkey, created_at,
					    kind, channel_id, raw, d, type, op)
			SELECT p_community[s.i], p_id[s.i], p_pubkey[s.i],
			       p_created_at[s.i], 45010, p_h[s.i], p_raw[s.i],
			       p_d[s.i], p_type[s.i], 'create'
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

-- comb_stamp_move_since (0004) as it was, but for the artifact's create:
-- read from its event.
CREATE OR REPLACE FUNCTION comb_stamp_move_since() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	SELECT coalesce(
		(SELECT max(m.moved_xid) FROM artifact_moves m
		  WHERE m.community_id = NEW.community_id AND m.d = NEW.d
		    AND m.to_channel = NEW.from_channel),
		(SELECT r.xid FROM events r
		  WHERE r.community_id = NEW.community_id AND r.d = NEW.d
		    AND r.op = 'create'))
	INTO NEW.from_since_xid;
	RETURN NEW;
END $$;
COMMIT;
-- comb:step
DROP TABLE IF EXISTS artifact_revisions_0024;
-- comb:step
DROP INDEX CONCURRENTLY IF EXISTS events_revisions_building;
-- comb:step
ANALYZE events;
