-- Communities, their hosts and admins, channels, members and stored events.
--
-- Every change a reader could need to learn about later carries the writing
-- transaction's id (xid8, pg_current_xact_id()) in a *_xid column, set by
-- triggers in the same transaction. Incremental reads compare these stamps
-- with the pg_snapshot_xmin() horizon of their own snapshot, so no change is
-- ever skipped, however long its transaction took to commit.

CREATE TABLE communities (
	id bigserial PRIMARY KEY,
	name text NOT NULL,
	cursor_epoch integer NOT NULL DEFAULT 1,
	created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE community_hosts (
	host text PRIMARY KEY CHECK (host = lower(host) AND host <> ''),
	community_id bigint NOT NULL REFERENCES communities
);

CREATE TABLE community_admins (
	community_id bigint NOT NULL REFERENCES communities,
	pubkey text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
	PRIMARY KEY (community_id, pubkey)
);

-- visibility: 0 open, 1 unlisted, 2 private (the numbers of comb/policy.h).
CREATE TABLE channels (
	community_id bigint NOT NULL REFERENCES communities,
	id uuid NOT NULL,
	name text NOT NULL,
	is_dm boolean NOT NULL DEFAULT false,
	visibility smallint NOT NULL CHECK (visibility BETWEEN 0 AND 2),
	ttl integer CHECK (ttl > 0),
	archived boolean NOT NULL DEFAULT false,
	deleted boolean NOT NULL DEFAULT false,
	created_by text NOT NULL,
	created_at bigint NOT NULL,
	-- the last change of who may read it: visibility, TTL, deletion
	policy_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, id),
	CHECK (NOT is_dm OR visibility = 2)
);

-- role: 1 member, 2 admin, 3 owner; a removed member keeps its row, inactive.
CREATE TABLE members (
	community_id bigint NOT NULL,
	channel_id uuid NOT NULL,
	pubkey text NOT NULL CHECK (pubkey ~ '^[0-9a-f]{64}$'),
	role smallint NOT NULL CHECK (role BETWEEN 1 AND 3),
	active boolean NOT NULL DEFAULT true,
	changed_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, channel_id, pubkey),
	FOREIGN KEY (community_id, channel_id) REFERENCES channels
);
CREATE INDEX members_by_reader ON members (community_id, pubkey, channel_id)
	INCLUDE (role) WHERE active;
CREATE INDEX members_changes ON members (community_id, pubkey, changed_xid);

-- Stored events. raw is the event exactly as served (JSON.stringify form).
-- community_id has no foreign key: every writer takes it from the
-- community_hosts lookup of the same request and communities are never
-- deleted, while the check would lock the community's single row (FOR KEY
-- SHARE) in every writing transaction, all of which contend for it. The
-- artifact tables of 0002 omit it for the same reason.
CREATE TABLE events (
	community_id bigint NOT NULL,
	seq bigserial NOT NULL,
	id text NOT NULL CHECK (id ~ '^[0-9a-f]{64}$'),
	pubkey text NOT NULL,
	created_at bigint NOT NULL,
	kind integer NOT NULL,
	channel_id uuid,
	raw text NOT NULL,
	deleted boolean NOT NULL DEFAULT false,   -- by its author's kind 5
	redacted boolean NOT NULL DEFAULT false,  -- by a kind 9005
	-- the storing transaction, for comb-capture's catch-up after a
	-- database reconnect (docs/operations.md, "Change capture")
	xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	PRIMARY KEY (community_id, id)
);
-- Events are served far more often than written: keep raw uncompressed so
-- that reads never pay for decompression.
ALTER TABLE events ALTER COLUMN raw SET STORAGE EXTERNAL;
CREATE UNIQUE INDEX events_seq ON events (seq);
CREATE INDEX events_by_channel ON events (community_id, channel_id, created_at DESC);
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC);
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC);
CREATE INDEX events_by_time ON events (community_id, created_at DESC);
CREATE INDEX events_changes ON events (community_id, xid);

-- Single-letter tags of stored events (name, first value), for #x filters.
CREATE TABLE event_tags (
	community_id bigint NOT NULL,
	event_seq bigint NOT NULL,
	name text NOT NULL,
	value text NOT NULL
);
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value, event_seq);
CREATE INDEX event_tags_by_event ON event_tags (event_seq);

-- Stores one event and its single-letter tags (name, first value; p_tags is
-- the event's tags array) in one call, so that writers pay one round trip
-- and the statements are planned once per connection. An event id the
-- community already has is left as it is: seq is then the stored event's
-- and inserted is false.
CREATE FUNCTION comb_store_event(p_community bigint, p_id text, p_pubkey text,
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
	 WHERE json_array_length(t) >= 2 AND octet_length(t->>0) = 1;
END $$;

-- The read key of comb/policy_set.h: the channel facts a policy decides on,
-- as one number. Readable channels are those whose key is in the list the
-- relay computed from the policy plugins for this reader.
CREATE FUNCTION comb_read_key(visibility smallint, is_dm boolean,
			      deleted boolean, archived boolean,
			      role smallint, named boolean)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT visibility::integer + (is_dm::integer << 2)
	       + (deleted::integer << 3) + (archived::integer << 4)
	       + (coalesce(role, 0)::integer << 5) + (named::integer << 7)
$$;

-- Stamp policy changes of a channel (not renames or archiving).
CREATE FUNCTION comb_stamp_channel_policy() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.visibility IS DISTINCT FROM OLD.visibility
	   OR NEW.ttl IS DISTINCT FROM OLD.ttl
	   OR NEW.deleted IS DISTINCT FROM OLD.deleted THEN
		NEW.policy_xid := pg_current_xact_id();
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER channels_policy_stamp BEFORE UPDATE ON channels
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_channel_policy();

-- Stamp every membership change: grant, role change, removal, rejoin.
CREATE FUNCTION comb_stamp_member() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.role IS DISTINCT FROM OLD.role
	   OR NEW.active IS DISTINCT FROM OLD.active THEN
		NEW.changed_xid := pg_current_xact_id();
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER members_stamp BEFORE UPDATE ON members
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_member();
