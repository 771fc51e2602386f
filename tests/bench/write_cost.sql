-- PostgreSQL's own cost of artifact creates against its floor, without a
-- relay or a client in between (docs/benchmarks.md, "The leaner artifact
-- row"): in the database psql is connected to (the bench's comb_bench,
-- migrated and loaded), :batches runs of 64 creates through
-- comb_artifact_create_run, each alternating with one plain 64-row INSERT
-- of the same events into a scratch copy of events (as `insert-floor`
-- does), so that load from elsewhere on the machine falls on both alike.
-- The events are built into a temporary table first; each statement then
-- reads one batch's arrays from it and stores them, so both pay the same
-- to get their input.
-- Prints, per create and per floor row, PostgreSQL's execution time and
-- the WAL records and bytes of the top-level statements
-- (pg_stat_statements). The creates stay in the ingest channel
-- (a series of d of their own).
--
-- usage: psql -X -v batches=50 -v admin=<admin pubkey hex> \
--             -v channel=<a channel uuid> -f tests/bench/write_cost.sql
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_write_cost_floor;
CREATE TABLE bench_write_cost_floor (LIKE events INCLUDING ALL);
DO $$ DECLARE o text[]; BEGIN
	SELECT reloptions INTO o FROM pg_class WHERE oid = 'events'::regclass;
	IF o IS NOT NULL THEN
		EXECUTE format('ALTER TABLE bench_write_cost_floor SET (%s)',
			       array_to_string(o, ', '));
	END IF;
END $$;
-- One revision's bytes (4.9 KB, as the fixture's), reused by every event.
SELECT repeat('x', 4700) AS pad \gset
SELECT comb_write_key(1, :'channel'::uuid, :'admin', true) AS wkey \gset
-- Every batch's events built beforehand (arrays of 64), so that only
-- the stores are timed: the creates' d and ids, and the floor's own ids.
CREATE TEMP TABLE cost_batches AS
WITH g AS (
	SELECT b, i, md5(random()::text) || md5(random()::text) AS id,
	       md5(random()::text) || md5(random()::text) AS floor_id,
	       gen_random_uuid() AS d
	  FROM generate_series(1, :batches) b, generate_series(1, 64) i
), t AS (
	SELECT g.*, json_build_array(json_build_array('ar', '1'),
		json_build_array('d', g.d), json_build_array('h', :'channel'::uuid),
		json_build_array('type', 'demo.task'), json_build_array('op', 'create'),
		json_build_array('title', 'Task ' || g.b || '.' || g.i),
		json_build_array('status', CASE WHEN g.i % 3 = 0 THEN 'done' ELSE 'open' END)) AS tags
	  FROM g
)
SELECT b, array_agg(1::bigint ORDER BY i) AS community, array_agg(id ORDER BY i) AS id,
       array_agg(floor_id ORDER BY i) AS floor_id,
       array_agg(:'admin'::text ORDER BY i) AS pubkey,
       array_agg(extract(epoch FROM now())::bigint ORDER BY i) AS created_at,
       array_agg(json_build_object('id', id, 'tags', tags, 'content', :'pad')::text ORDER BY i) AS raw,
       array_agg(tags ORDER BY i) AS tags, array_agg(d ORDER BY i) AS d,
       array_agg(:'channel'::uuid ORDER BY i) AS h,
       array_agg('demo.task'::text ORDER BY i) AS type, array_agg(NULL::text ORDER BY i) AS root,
       array_agg(true ORDER BY i) AS fresh,
       array_agg('{' || :'wkey' || '}' ORDER BY i) AS keys
  FROM t GROUP BY b;
SELECT pg_stat_statements_reset();

PREPARE creates(integer) AS
SELECT count(*) FROM cost_batches c, comb_artifact_create_run(c.community, c.id,
	c.pubkey, c.created_at, c.raw, c.tags, c.d, c.h, c.type, c.root, c.fresh, c.keys) r
 WHERE c.b = $1 AND r.outcome = 0;
PREPARE floor_rows(integer) AS
INSERT INTO bench_write_cost_floor (community_id, id, pubkey, created_at, kind, channel_id, raw)
SELECT u.* FROM cost_batches c, unnest(c.community, c.floor_id, c.pubkey, c.created_at,
	array_fill(45010, ARRAY[64]), c.h, c.raw) u
 WHERE c.b = $1;

SELECT format('EXECUTE creates(%s); EXECUTE floor_rows(%s);', b, b)
  FROM generate_series(1, :batches) b \gexec

SELECT CASE WHEN query LIKE '%comb_artifact_create_run%' THEN 'create (per create)'
	    ELSE 'floor (per row)' END AS what,
       sum(calls) AS statements,
       round((sum(total_exec_time) * 1000 / (64 * sum(calls)))::numeric, 1) AS us,
       round(sum(wal_records)::numeric / (64 * sum(calls)), 2) AS wal_records,
       round(sum(wal_bytes)::numeric / (64 * sum(calls)), 0) AS wal_bytes
  FROM pg_stat_statements
 WHERE toplevel AND (query LIKE 'PREPARE creates%' OR query LIKE 'PREPARE floor_rows%')
 GROUP BY 1 ORDER BY 1;
DROP TABLE bench_write_cost_floor;
DROP TABLE cost_batches;
