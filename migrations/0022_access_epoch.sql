-- A community's access epoch: who may read what in a community changes
-- only with its memberships, its channels (created, deleted, or their
-- visibility, DM flag, archived flag or TTL changed) and its admins, and
-- every statement that changes any of them raises the epoch of each
-- community it touched, in its own transaction (once per statement and
-- community, so a bulk load or COPY costs one row update).
--
-- A `current` sync records the epoch of the snapshot in which it found
-- every one of its channels readable. A live re-read that finds the same
-- epoch in its own snapshot knows that nothing about any reader's access
-- in that community changed in between, and checks no membership; one
-- that finds another checks every channel of the sync again (relay
-- services/relay/sync/apply.c).
--
-- Adding a column with a constant default rewrites nothing; the triggers
-- take effect for the statements that start after this commits.

ALTER TABLE communities ADD COLUMN access_epoch bigint NOT NULL DEFAULT 0;

-- Raises the epoch of every community among the statement's rows (the
-- transition table `changed`).
CREATE FUNCTION comb_raise_access_epoch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE communities SET access_epoch = access_epoch + 1
	 WHERE id IN (SELECT community_id FROM changed);
	RETURN NULL;
END $$;

-- The same for the channels whose access changed in an UPDATE (`before`
-- and `changed` the rows before and after it).
CREATE FUNCTION comb_raise_access_epoch_channels() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	UPDATE communities SET access_epoch = access_epoch + 1
	 WHERE id IN (SELECT n.community_id
			FROM changed n JOIN before o
			  ON o.community_id = n.community_id AND o.id = n.id
		       WHERE (o.visibility, o.is_dm, o.archived, o.deleted, o.ttl)
			     IS DISTINCT FROM
			     (n.visibility, n.is_dm, n.archived, n.deleted, n.ttl));
	RETURN NULL;
END $$;

CREATE TRIGGER members_access_epoch_insert AFTER INSERT ON members
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
CREATE TRIGGER members_access_epoch_update AFTER UPDATE ON members
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
CREATE TRIGGER members_access_epoch_delete AFTER DELETE ON members
	REFERENCING OLD TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();

CREATE TRIGGER channels_access_epoch_insert AFTER INSERT ON channels
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
CREATE TRIGGER channels_access_epoch_update AFTER UPDATE ON channels
	REFERENCING OLD TABLE AS before NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch_channels();
CREATE TRIGGER channels_access_epoch_delete AFTER DELETE ON channels
	REFERENCING OLD TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();

CREATE TRIGGER community_admins_access_epoch_insert AFTER INSERT ON community_admins
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
CREATE TRIGGER community_admins_access_epoch_update AFTER UPDATE ON community_admins
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
CREATE TRIGGER community_admins_access_epoch_delete AFTER DELETE ON community_admins
	REFERENCING OLD TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION comb_raise_access_epoch();
