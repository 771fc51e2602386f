-- Artifacts (kind 45010, PROTOCOL.md section 5): current heads, the
-- permanent ledger of accepted revisions, move records, the tags of current
-- heads for indexable #name predicates, and redaction records.
--
-- Revisions themselves are stored in events (channel_id = their home h);
-- these tables say which revision is current and what happened to each.
-- Every change a reader could need to learn about carries the writing
-- transaction's pg_current_xact_id() (xid8), set in the same transaction
-- by the column defaults when a row is inserted and by the triggers below
-- when a head is updated: head changes (create, update, move in, delete,
-- restore, redaction of the current revision) in artifact_heads.changed_xid,
-- moves in artifact_moves.moved_xid, redactions in
-- artifact_redactions.redacted_xid. A rolled-back write leaves no row and
-- therefore no stamp. Writers never name the *_xid columns.
--
-- None of these tables has a foreign key to communities (see events in
-- 0001); the artifact write itself is one function, comb_artifact_write,
-- at the end of this file.

-- The permanent ledger: one row per accepted revision, kept when the
-- revision is redacted or its event is removed, so that resubmitting an
-- accepted event id stays idempotent. seq is the event's events.seq at
-- acceptance, which orders the revisions of one artifact (writes on one d
-- are serialized) and every `history` answer.
CREATE TABLE artifact_revisions (
	community_id bigint NOT NULL,
	id text NOT NULL CHECK (id ~ '^[0-9a-f]{64}$'),
	d uuid NOT NULL,
	seq bigint NOT NULL,
	channel_id uuid NOT NULL,              -- the revision's h
	type text NOT NULL,
	op text NOT NULL CHECK (op IN ('create', 'update', 'move', 'delete', 'restore')),
	prev text CHECK (prev ~ '^[0-9a-f]{64}$'),
	redacted boolean NOT NULL DEFAULT false,
	accepted_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, id)
);
CREATE INDEX artifact_revisions_by_d ON artifact_revisions (community_id, d, seq);

-- One row per artifact: which revision is current and the facts the write
-- rules compare. accepted_seq (the current revision's events.seq) orders
-- `current` newest first. redacted mirrors the current revision's state.
CREATE TABLE artifact_heads (
	community_id bigint NOT NULL,
	d uuid NOT NULL,
	revision_id text NOT NULL CHECK (revision_id ~ '^[0-9a-f]{64}$'),
	accepted_seq bigint NOT NULL,
	channel_id uuid NOT NULL,              -- the home channel
	type text NOT NULL,
	creator text NOT NULL CHECK (creator ~ '^[0-9a-f]{64}$'),
	deleted boolean NOT NULL DEFAULT false,
	root text CHECK (root ~ '^[0-9a-f]{64}$'),
	redacted boolean NOT NULL DEFAULT false,
	changed_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	-- No foreign key to channels: its check would share-lock the channel
	-- row while the artifact lock is held, and moderation (which locks the
	-- channel row, then an artifact to redact it) would deadlock with it.
	-- Writers check that the channel exists before storing a head.
	PRIMARY KEY (community_id, d)
);
-- `current`, newest first, over live heads (with and without #h).
CREATE INDEX artifact_heads_current ON artifact_heads (community_id, accepted_seq DESC)
	WHERE NOT deleted AND NOT redacted;
CREATE INDEX artifact_heads_current_by_channel
	ON artifact_heads (community_id, channel_id, accepted_seq DESC)
	WHERE NOT deleted AND NOT redacted;
-- `current` driven by a tag predicate: each matching d is looked up in an
-- index that already holds what the query needs (home for access, type
-- for #type, accepted_seq for the order), so the plan stays on indexes.
CREATE INDEX artifact_heads_live ON artifact_heads (community_id, d)
	INCLUDE (channel_id, accepted_seq, type) WHERE NOT deleted AND NOT redacted;
-- Reads of a channel's heads (sync snapshots, incremental reads) use
-- artifact_heads_by_home (0004); changes in change order use
-- artifact_heads_changes_all (0004).

-- The tags of each current revision as (name, first value) rows, replaced
-- on every head change, so that `current` predicates are index lookups.
-- d, h and type are answered from artifact_heads' own columns and are not
-- repeated here; a redacted current revision has no rows (its client tags
-- are withheld). Values may be up to 4096 bytes, beyond what a btree entry
-- holds, so the index keys on md5(value) and queries recheck value itself.
-- The rows are only ever written by the artifact write path, under the
-- artifact's lock and together with its head, so no foreign key checks
-- them (it would cost a lookup per tag on every write).
CREATE TABLE artifact_head_tags (
	community_id bigint NOT NULL,
	d uuid NOT NULL,
	name text NOT NULL,
	value text NOT NULL
);
CREATE UNIQUE INDEX artifact_head_tags_by_head
	ON artifact_head_tags (community_id, d, name, md5(value));
CREATE INDEX artifact_head_tags_lookup
	ON artifact_head_tags (community_id, name, md5(value)) INCLUDE (d);
-- name, value and md5(value) are strongly correlated (a predicate names all
-- three); without joint statistics the planner multiplies their
-- selectivities, underestimates broad predicates by orders of magnitude
-- and picks nested loops over every channel (docs/plans.md).
CREATE STATISTICS artifact_head_tags_stats (mcv, dependencies)
	ON name, value, md5(value) FROM artifact_head_tags;

-- One row per move: the source and destination channels, the revision the
-- move replaced, the move revision and the kind-45011 marker the relay
-- stored in the source channel.
CREATE TABLE artifact_moves (
	community_id bigint NOT NULL,
	d uuid NOT NULL,
	from_channel uuid NOT NULL,
	to_channel uuid NOT NULL,
	replaced_revision text NOT NULL CHECK (replaced_revision ~ '^[0-9a-f]{64}$'),
	revision_id text NOT NULL CHECK (revision_id ~ '^[0-9a-f]{64}$'),
	marker_id text NOT NULL CHECK (marker_id ~ '^[0-9a-f]{64}$'),
	moved_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, revision_id)
);
CREATE INDEX artifact_moves_from ON artifact_moves (community_id, from_channel, moved_xid);
CREATE INDEX artifact_moves_to ON artifact_moves (community_id, to_channel, moved_xid);

-- One row per redacted revision: the kind-9005 that redacted it, the
-- relay-signed marker served in its place (stored in events) and when.
CREATE TABLE artifact_redactions (
	community_id bigint NOT NULL,
	revision_id text NOT NULL CHECK (revision_id ~ '^[0-9a-f]{64}$'),
	d uuid NOT NULL,
	channel_id uuid NOT NULL,
	redaction_id text NOT NULL CHECK (redaction_id ~ '^[0-9a-f]{64}$'),
	marker_id text NOT NULL CHECK (marker_id ~ '^[0-9a-f]{64}$'),
	marker_seq bigint NOT NULL,
	redacted_at bigint NOT NULL,
	redacted_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, revision_id)
);
CREATE INDEX artifact_redactions_changes
	ON artifact_redactions (community_id, channel_id, redacted_xid);

-- Channel policy and membership changes are stamped by 0001's triggers;
-- these indexes let incremental reads find them per channel.
CREATE INDEX channels_policy_changes ON channels (community_id, policy_xid);
CREATE INDEX members_changes_by_channel ON members (community_id, channel_id, changed_xid);

-- Stamps every head change with the writing transaction: an update of the
-- current revision, home channel, deleted or redacted state (a created
-- head is stamped by the column default). The WHEN clause spares the call
-- for updates that change none of them.
CREATE FUNCTION comb_stamp_artifact_head() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.changed_xid := pg_current_xact_id();
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_heads_stamp BEFORE UPDATE ON artifact_heads
	FOR EACH ROW WHEN (NEW.revision_id IS DISTINCT FROM OLD.revision_id
			   OR NEW.channel_id IS DISTINCT FROM OLD.channel_id
			   OR NEW.deleted IS DISTINCT FROM OLD.deleted
			   OR NEW.redacted IS DISTINCT FROM OLD.redacted)
	EXECUTE FUNCTION comb_stamp_artifact_head();

-- The write key of a channel for an actor: comb_read_key() of its facts
-- with the actor's active role and named set (a write names its channel),
-- plus 256 when the actor is a community admin; NULL when the channel does
-- not exist. The relay lists the keys its policy plugins allow
-- (access_action_keys_literal), so the decision stays the plugins'. The
-- channel row is locked FOR SHARE, as every artifact writer locks the
-- channels it checks (see 0004).
CREATE FUNCTION comb_write_key(p_community bigint, p_channel uuid,
			       p_pubkey text, p_admin boolean)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	v_key integer;
BEGIN
	SELECT comb_read_key(c.visibility, c.is_dm, c.deleted, c.archived,
			     (SELECT m.role FROM members m
			       WHERE m.community_id = c.community_id
				 AND m.channel_id = c.id AND m.pubkey = p_pubkey
				 AND m.active), true)
	       + (p_admin::integer << 8)
	  INTO v_key
	  FROM channels c
	 WHERE c.community_id = p_community AND c.id = p_channel
	   FOR SHARE OF c;
	RETURN v_key;
END $$;

-- The transactional part of a kind-45010 write (PROTOCOL.md sections 5 and
-- 10), in one call: the relay has checked the envelope and passes the
-- revision's facts, whether created_at is fresh, and the write keys its
-- policy plugins allow (p_write_keys, see comb_write_key) and, for a delete
-- or restore, the keys allowed to delete (p_delete_keys: the home's write
-- key plus 512 when the signer created the artifact).
--
-- In the order of section 10 it answers with the first rule that refuses,
-- as outcome (the relay words the answers):
--   0 stored                       1 accepted before (nothing changes)
--   2 accepted meanwhile           3 created_at not fresh
--   4 not a member of h            5 artifact identity taken
--   6 artifact head unavailable    7 artifact head changed
--   8 type is immutable            9 deleted accepts only restore
--   10 only move changes the home  11 may not delete or restore
--   12 root is not a message in h
-- and stores nothing unless the outcome is 0. Then the revision's event
-- (inserted: whether it was new), ledger row, head and head tags are
-- stored; for a move, source and replaced are the home and revision it
-- left, and the caller, in the same transaction, stores the relay-signed
-- removal marker and the move record. Everything else runs as the
-- caller's own statement, so a write that is not a move needs no explicit
-- transaction.
--
-- Locks, in this order: a create or move share-locks its channels (a
-- move's source as read before, both in uuid order, which is the order of
-- their text), then takes the artifact's advisory lock (the key
-- artifact_lock() in the relay takes too), then the head FOR UPDATE; an
-- edit share-locks the home after the head. Moderation takes channel rows,
-- then artifacts, so the two never wait on each other in a cycle.
CREATE FUNCTION comb_artifact_write(
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
	IF EXISTS (SELECT 1 FROM artifact_revisions r
		    WHERE r.community_id = p_community AND r.id = p_id) THEN
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
	IF EXISTS (SELECT 1 FROM artifact_revisions r
		    WHERE r.community_id = p_community AND r.id = p_id) THEN
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

	SELECT s.seq, s.inserted INTO v_seq, inserted
	  FROM comb_store_event(p_community, p_id, p_pubkey, p_created_at,
				45010, p_h, p_raw, p_tags) s;
	INSERT INTO artifact_revisions (community_id, id, d, seq, channel_id,
					type, op, prev)
	VALUES (p_community, p_id, p_d, v_seq, p_h, p_type, p_op, p_prev);
	IF p_op = 'create' THEN
		INSERT INTO artifact_heads (community_id, d, revision_id,
					    accepted_seq, channel_id, type,
					    creator, root)
		VALUES (p_community, p_d, p_id, v_seq, p_h, p_type, p_pubkey,
			p_root);
	ELSE
		UPDATE artifact_heads h
		   SET revision_id = p_id, accepted_seq = v_seq, channel_id = p_h,
		       deleted = (p_op = 'delete'), root = p_root, redacted = false
		 WHERE h.community_id = p_community AND h.d = p_d;
		DELETE FROM artifact_head_tags t
		 WHERE t.community_id = p_community AND t.d = p_d;
	END IF;
	-- The head's tags: (name, first value) of every tag but d, h and type,
	-- each pair once (the head has no rows left: it is new, or they were
	-- deleted above).
	INSERT INTO artifact_head_tags (community_id, d, name, value)
	SELECT DISTINCT p_community, p_d, t->>0, t->>1
	  FROM json_array_elements(p_tags) t
	 WHERE json_array_length(t) >= 2 AND t->>0 NOT IN ('d', 'h', 'type');
	source := v_head.channel_id;
	replaced := v_head.revision_id;
	outcome := 0;
END $$;
