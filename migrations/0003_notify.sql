-- Change notifications for comb-capture.
--
-- Every change a relay node needs to hear about raises
-- pg_notify('comb', <payload>) in the writing transaction. PostgreSQL
-- delivers notifications only after commit, in commit order, and never
-- for a rolled-back transaction; identical payloads raised twice in one
-- transaction are delivered once. comb-capture LISTENs on "comb", turns
-- each payload into a signal (shared/include/comb/signal.h) and publishes
-- it to every relay node over ZeroMQ.
--
-- The payload is one line of eight space-separated fields, "-" for none
-- (parsed by comb_signal_parse_notify, at most 512 bytes, far below
-- NOTIFY's 8000):
--     <type> <community> <channel> <xid> <d> <pubkey> <id> <kind>
-- type is head, move, redaction, member, channel or event; xid is
-- pg_current_xact_id() of the writing transaction, the same value the
-- *_xid stamps of 0001 and 0002 hold.

CREATE FUNCTION comb_notify(type text, community bigint, channel uuid,
			    d uuid, pubkey text, id text, kind integer)
RETURNS void LANGUAGE sql AS $$
	SELECT pg_notify('comb', concat_ws(' ', type, community::text,
		coalesce(channel::text, '-'), pg_current_xact_id()::text,
		coalesce(d::text, '-'), coalesce(pubkey, '-'),
		coalesce(id, '-'), coalesce(kind, 0)::text))
$$;

-- Artifact heads: creation, a new current revision, a move in or out,
-- deletion, restoration, redaction of the current revision. A head that
-- leaves its channel also raises a move for the source channel (the same
-- payload artifact_moves raises, so the two are delivered once).
CREATE FUNCTION comb_notify_artifact_head() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		PERFORM comb_notify('head', OLD.community_id, OLD.channel_id,
				    OLD.d, NULL, NULL, NULL);
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE'
	   AND NEW.revision_id IS NOT DISTINCT FROM OLD.revision_id
	   AND NEW.channel_id IS NOT DISTINCT FROM OLD.channel_id
	   AND NEW.deleted IS NOT DISTINCT FROM OLD.deleted
	   AND NEW.redacted IS NOT DISTINCT FROM OLD.redacted THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.channel_id IS DISTINCT FROM OLD.channel_id THEN
		PERFORM comb_notify('move', OLD.community_id, OLD.channel_id,
				    OLD.d, NULL, NEW.revision_id, NULL);
	END IF;
	PERFORM comb_notify('head', NEW.community_id, NEW.channel_id, NEW.d,
			    NULL, NEW.revision_id, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER artifact_heads_notify AFTER INSERT OR UPDATE OR DELETE
	ON artifact_heads FOR EACH ROW EXECUTE FUNCTION comb_notify_artifact_head();

-- Move records: the artifact left from_channel (id: the move revision).
CREATE FUNCTION comb_notify_artifact_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM comb_notify('move', NEW.community_id, NEW.from_channel, NEW.d,
			    NULL, NEW.revision_id, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER artifact_moves_notify AFTER INSERT ON artifact_moves
	FOR EACH ROW EXECUTE FUNCTION comb_notify_artifact_move();

-- Redactions of artifact revisions, current or not (id: the redacted
-- revision).
CREATE FUNCTION comb_notify_artifact_redaction() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM comb_notify('redaction', NEW.community_id, NEW.channel_id, NEW.d,
			    NULL, NEW.revision_id, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER artifact_redactions_notify AFTER INSERT ON artifact_redactions
	FOR EACH ROW EXECUTE FUNCTION comb_notify_artifact_redaction();

-- Memberships: a grant, a role change, a removal, a rejoin.
CREATE FUNCTION comb_notify_member() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		PERFORM comb_notify('member', OLD.community_id, OLD.channel_id,
				    NULL, OLD.pubkey, NULL, NULL);
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE'
	   AND NEW.role IS NOT DISTINCT FROM OLD.role
	   AND NEW.active IS NOT DISTINCT FROM OLD.active THEN
		RETURN NULL;
	END IF;
	PERFORM comb_notify('member', NEW.community_id, NEW.channel_id, NULL,
			    NEW.pubkey, NULL, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER members_notify AFTER INSERT OR UPDATE OR DELETE ON members
	FOR EACH ROW EXECUTE FUNCTION comb_notify_member();

-- Channels: creation and every change of the facts a read policy decides
-- on (visibility, TTL, archived, deleted). Renames raise nothing.
CREATE FUNCTION comb_notify_channel() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		PERFORM comb_notify('channel', OLD.community_id, OLD.id, NULL,
				    NULL, NULL, NULL);
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE'
	   AND NEW.visibility IS NOT DISTINCT FROM OLD.visibility
	   AND NEW.ttl IS NOT DISTINCT FROM OLD.ttl
	   AND NEW.archived IS NOT DISTINCT FROM OLD.archived
	   AND NEW.deleted IS NOT DISTINCT FROM OLD.deleted THEN
		RETURN NULL;
	END IF;
	PERFORM comb_notify('channel', NEW.community_id, NEW.id, NULL, NULL,
			    NULL, NULL);
	RETURN NULL;
END $$;
CREATE TRIGGER channels_notify AFTER INSERT OR UPDATE OR DELETE ON channels
	FOR EACH ROW EXECUTE FUNCTION comb_notify_channel();

-- Stored events other than artifact revisions and removal markers (those
-- reach relays as head, move and redaction signals): chat messages,
-- deletion requests and moderation events, for live plain REQs.
CREATE FUNCTION comb_notify_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM comb_notify('event', NEW.community_id, NEW.channel_id, NULL,
			    NEW.pubkey, NEW.id, NEW.kind);
	RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
	FOR EACH ROW WHEN (NEW.kind NOT IN (45010, 45011))
	EXECUTE FUNCTION comb_notify_event();

-- Catch-up after a database reconnect (docs/operations.md, "Change
-- capture"): a leader that lost its session reads every change stamped at
-- or after its horizon from the *_xid stamps. Channel signals are raised on
-- more changes (archiving) than channels.policy_xid records, so channels
-- carry a stamp of their own for the changes comb_notify_channel signals.
ALTER TABLE channels ADD COLUMN signal_xid xid8 NOT NULL
	DEFAULT pg_current_xact_id();

CREATE FUNCTION comb_stamp_channel_signal() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.visibility IS DISTINCT FROM OLD.visibility
	   OR NEW.ttl IS DISTINCT FROM OLD.ttl
	   OR NEW.archived IS DISTINCT FROM OLD.archived
	   OR NEW.deleted IS DISTINCT FROM OLD.deleted THEN
		NEW.signal_xid := pg_current_xact_id();
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER channels_signal_stamp BEFORE UPDATE ON channels
	FOR EACH ROW EXECUTE FUNCTION comb_stamp_channel_signal();
CREATE INDEX channels_signal_changes ON channels (community_id, signal_xid);

-- The epoch the capture leader publishes, written by each instance that
-- starts an epoch. A leader that reconnects continues its epoch only if
-- this still names it, i.e. no other instance led in between.
CREATE TABLE capture_leader (
	id boolean PRIMARY KEY DEFAULT true CHECK (id),
	epoch text NOT NULL,
	since timestamptz NOT NULL DEFAULT now()
);
