-- The 64-hex checks of the tables every write inserts into (events,
-- artifact_revisions, artifact_heads) without the bounded-repetition
-- regular expression: '^[0-9a-f]{64}$' cost about 13 us per value
-- through the regex engine (four per artifact create), the equivalent
-- "64 bytes, none outside [0-9a-f]" under 1 us. Both accept exactly the
-- strings of 64 lowercase hex digits (a string with no character outside
-- [0-9a-f] is ASCII, so 64 bytes are 64 characters) and let NULL pass.
-- The names stay those of 0001 and 0002; the rarely written tables keep
-- their checks.

ALTER TABLE events DROP CONSTRAINT events_id_check,
	ADD CONSTRAINT events_id_check
	CHECK (octet_length(id) = 64 AND id !~ '[^0-9a-f]');

ALTER TABLE artifact_revisions DROP CONSTRAINT artifact_revisions_id_check,
	ADD CONSTRAINT artifact_revisions_id_check
	CHECK (octet_length(id) = 64 AND id !~ '[^0-9a-f]'),
	DROP CONSTRAINT artifact_revisions_prev_check,
	ADD CONSTRAINT artifact_revisions_prev_check
	CHECK (octet_length(prev) = 64 AND prev !~ '[^0-9a-f]');

ALTER TABLE artifact_heads DROP CONSTRAINT artifact_heads_revision_id_check,
	ADD CONSTRAINT artifact_heads_revision_id_check
	CHECK (octet_length(revision_id) = 64 AND revision_id !~ '[^0-9a-f]'),
	DROP CONSTRAINT artifact_heads_creator_check,
	ADD CONSTRAINT artifact_heads_creator_check
	CHECK (octet_length(creator) = 64 AND creator !~ '[^0-9a-f]'),
	DROP CONSTRAINT artifact_heads_root_check,
	ADD CONSTRAINT artifact_heads_root_check
	CHECK (octet_length(root) = 64 AND root !~ '[^0-9a-f]');
