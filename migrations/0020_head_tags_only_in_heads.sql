-- The third step of the online upgrade of 0018 (docs/operations.md,
-- "Upgrading to 0021"): the heads' tags are only in artifact_heads.tags.
-- The transitional mirror goes, and so does the table artifact_head_tags;
-- a view of the same name and columns takes its place, over the live and
-- deleted heads' tags (a redacted current revision's are withheld, as the
-- table's rows were), so that relays of the previous release, still
-- running during the upgrade or brought back by a rollback, read what
-- they read before (their tag predicates check each head through the
-- view, without an index of their own). Their redaction deletes the
-- head's rows: the view's INSTEAD OF trigger does nothing, since a
-- redacted head's tags are not in the view.

DROP TRIGGER artifact_heads_mirror_tags_inserted ON artifact_heads;
DROP TRIGGER artifact_heads_mirror_tags_updated ON artifact_heads;
DROP FUNCTION comb_mirror_head_tags();
DROP TABLE artifact_head_tags;

CREATE VIEW artifact_head_tags AS
SELECT h.community_id, h.d, e.key AS name, v.value
  FROM artifact_heads h
 CROSS JOIN LATERAL jsonb_each(h.tags) e
 CROSS JOIN LATERAL jsonb_array_elements_text(e.value) v
 WHERE NOT h.redacted;

-- A DELETE of a head's rows (a redaction by the previous release) changes
-- nothing: the view already withholds a redacted head's tags.
CREATE FUNCTION comb_head_tags_view_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END $$;
CREATE TRIGGER artifact_head_tags_delete INSTEAD OF DELETE ON artifact_head_tags
	FOR EACH ROW EXECUTE FUNCTION comb_head_tags_view_delete();

-- Every head has its tags from now on: a head stored without naming them
-- has none (the default changes no stored row), and none is NULL (checked
-- on the rows there are by 0021).
ALTER TABLE artifact_heads ALTER COLUMN tags SET DEFAULT '{}'::jsonb;
ALTER TABLE artifact_heads ADD CONSTRAINT artifact_heads_tags_set
	CHECK (tags IS NOT NULL) NOT VALID;
