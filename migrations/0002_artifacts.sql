-- Artifacts (kind 45010, PROTOCOL.md section 5): current heads, the
-- permanent ledger of accepted revisions, move records, the tags of current
-- heads for indexable #name predicates, and redaction records.
--
-- Revisions themselves are stored in events (channel_id = their home h);
-- these tables say which revision is current and what happened to each.
-- Every change a reader could need to learn about carries the writing
-- transaction's pg_current_xact_id() (xid8), set by the triggers below in
-- the same transaction: head changes (create, update, move in, delete,
-- restore, redaction of the current revision) in artifact_heads.changed_xid,
-- moves in artifact_moves.moved_xid, redactions in
-- artifact_redactions.redacted_xid. A rolled-back write leaves no row and
-- therefore no stamp.

-- The permanent ledger: one row per accepted revision, kept when the
-- revision is redacted or its event is removed, so that resubmitting an
-- accepted event id stays idempotent. seq is the event's events.seq at
-- acceptance, which orders the revisions of one artifact (writes on one d
-- are serialized) and every `history` answer.
CREATE TABLE artifact_revisions (
	community_id bigint NOT NULL REFERENCES communities,
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
	community_id bigint NOT NULL REFERENCES communities,
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
-- Incremental reads: what changed in a channel since a transaction position.
CREATE INDEX artifact_heads_changes ON artifact_heads (community_id, channel_id, changed_xid);

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

-- Stamps every head change with the writing transaction: creation, and any
-- update of the current revision, home channel, deleted or redacted state.
CREATE FUNCTION comb_stamp_artifact_head() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT'
	   OR NEW.revision_id IS DISTINCT FROM OLD.revision_id
	   OR NEW.channel_id IS DISTINCT FROM OLD.channel_id
	   OR NEW.deleted IS DISTINCT FROM OLD.deleted
	   OR NEW.redacted IS DISTINCT FROM OLD.redacted THEN
		NEW.changed_xid := pg_current_xact_id();
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_heads_stamp BEFORE INSERT OR UPDATE ON artifact_heads
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_artifact_head();

-- Move and redaction records and ledger rows are stamped on insert whatever
-- the statement says.
CREATE FUNCTION comb_stamp_artifact_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.moved_xid := pg_current_xact_id();
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_moves_stamp BEFORE INSERT ON artifact_moves
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_artifact_move();

CREATE FUNCTION comb_stamp_artifact_redaction() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.redacted_xid := pg_current_xact_id();
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_redactions_stamp BEFORE INSERT ON artifact_redactions
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_artifact_redaction();

CREATE FUNCTION comb_stamp_artifact_revision() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.accepted_xid := pg_current_xact_id();
	RETURN NEW;
END $$;
CREATE TRIGGER artifact_revisions_stamp BEFORE INSERT ON artifact_revisions
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_artifact_revision();
