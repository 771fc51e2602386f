/*
 * The PostgreSQL floors the scenarios are compared with, measured in the
 * same run on the same machine:
 *
 * `comb-bench floor-copy`: the stored JSON of the reader's current
 * artifacts (all of them, or those of the first --channels channels),
 * fetched with one COPY (SELECT raw ...) TO STDOUT through libpq, ordered
 * by d like the relay's pages and snapshots, with the same membership
 * join. Median of --runs runs.
 *
 * `comb-bench insert-floor`: the ingest scenario's signed events stored
 * with plain multi-row INSERTs (--batch rows per statement, one commit
 * each) over --conns connections into a scratch copy of the events table
 * (same columns, defaults and indexes), dropped afterwards. With --rows
 * artifact, each event is stored as its revision (with its d, type and
 * op, as migration 0025 keeps a revision) and each statement also stores
 * every event's head row (the head's tags as artifact_heads.tags holds
 * them, built here) into a scratch copy of artifact_heads: the rows an
 * artifact create must write, with every index the reads use, and
 * nothing else (no check, lock or trigger): the floor of a create's
 * storage in PostgreSQL (docs/benchmarks.md, "Fewer rows per artifact
 * create").
 *
 * bench_delta_floor (for `incr-delta`): what PostgreSQL must do for a
 * catch-up read, without the relay: the change query the relay runs
 * (comb_incremental_changes, with the reader's read keys from the same
 * policy plugin) and the stored bytes of the revisions it names, fetched
 * in one statement by a bare libpq client.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "bench.h"
#include "comb/error.h"
#include "comb/policy_set.h"

static PGconn *connect_db(const char *url)
{
	PGconn *db = PQconnectdb(url);

	if (PQstatus(db) != CONNECTION_OK) {
		bench_log("%s", PQerrorMessage(db));
		PQfinish(db);
		return NULL;
	}
	return db;
}

/* Builds the floor query for the first nchannels channels (0: all). */
static int floor_query(const struct bench_layout *l, int nchannels,
		       struct comb_buf *q)
{
	char id[37];
	int i, rc;

	rc = comb_buf_printf(q,
		"COPY (SELECT e.raw FROM artifact_heads h"
		" JOIN members m ON m.community_id = h.community_id"
		"  AND m.channel_id = h.channel_id AND m.pubkey = '%s' AND m.active"
		" JOIN events e ON e.community_id = h.community_id AND e.id = h.revision_id"
		" WHERE h.community_id = %ld AND NOT h.deleted AND NOT h.redacted",
		l->reader_pk, l->community);
	if (rc == 0 && nchannels > 0) {
		rc = comb_buf_puts(q, " AND h.channel_id = ANY('{");
		for (i = 0; i < nchannels && rc == 0; i++) {
			bench_channel_id(l, i, id);
			rc = comb_buf_printf(q, "%s%s", i ? "," : "", id);
		}
		if (rc == 0)
			rc = comb_buf_puts(q, "}'::uuid[])");
	}
	return rc ? rc : comb_buf_puts(q, " ORDER BY h.d) TO STDOUT");
}

/* One COPY run: rows and bytes received, seconds taken. */
static int copy_once(PGconn *db, const char *sql, long *rows, long *bytes,
		     double *seconds)
{
	double t0 = bench_now();
	PGresult *res = PQexec(db, sql);
	char *buf;
	int n, rc = 0;

	*rows = *bytes = 0;
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		bench_log("floor: %s", PQresultErrorMessage(res));
		PQclear(res);
		return COMB_EUNAVAIL;
	}
	PQclear(res);
	while ((n = PQgetCopyData(db, &buf, 0)) > 0) {
		(*rows)++;
		*bytes += n;
		PQfreemem(buf);
	}
	*seconds = bench_now() - t0;
	if (n != -1)
		rc = COMB_EUNAVAIL;
	while ((res = PQgetResult(db))) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			rc = COMB_EUNAVAIL;
		PQclear(res);
	}
	return rc;
}

int bench_cmd_floor_copy(int argc, char **argv)
{
	const char *url = bench_opt(argc, argv, "--db", NULL);
	int nchannels = (int)bench_opt_long(argc, argv, "--channels", 0);
	int runs = (int)bench_opt_long(argc, argv, "--runs", 3), i, expected;
	struct bench_layout l;
	struct comb_buf q;
	double secs[16];
	long rows = 0, bytes = 0;
	PGconn *db = NULL;
	json_t *all;
	int rc;

	comb_buf_init(&q, 1 << 20);
	if (runs < 1 || runs > 16)
		runs = 3;
	rc = bench_layout_from_opts(&l, argc, argv);
	if (rc == 0 && !(db = url ? connect_db(url) : NULL))
		rc = COMB_EUNAVAIL;
	if (rc == 0)
		rc = floor_query(&l, nchannels, &q);
	all = json_array();
	for (i = 0; i < runs && rc == 0; i++) {
		rc = copy_once(db, q.data, &rows, &bytes, &secs[i]);
		json_array_append_new(all, json_real(secs[i]));
	}
	expected = nchannels > 0 ? bench_artifacts_in(&l, nchannels) : l.artifacts;
	if (rc == 0)
		bench_print(json_pack("{s:s,s:f,s:o,s:i,s:i,s:I,s:b}",
			"command", "floor-copy",
			"seconds", bench_quantile(secs, (size_t)runs, 0.5),
			"runs", all, "rows", (int)rows, "expected_rows", expected,
			"bytes", (json_int_t)bytes, "ok", rows == expected));
	else
		json_decref(all);
	PQfinish(db);
	comb_buf_release(&q);
	return rc ? 1 : 0;
}

/* ---- insert-floor ---- */

struct insert_job {
	const char *url;
	const struct bench_layout *l;
	struct comb_event *evs;
	size_t from, to;
	int batch;
	bool artifact;  /* --rows artifact: revisions, and their head rows */
	int rc;
};

/* Parameters per row: the event's seven columns, then (artifact rows)
 * its d, type and head tags. */
#define FLOOR_EVENT_PARAMS 7
#define FLOOR_ARTIFACT_PARAMS 10

/* The statement of n rows: the events alone, or as revisions with their
 * head rows (one statement, so that both floors commit once a batch). */
static void floor_statement(struct comb_buf *sql, size_t n, bool artifact)
{
	size_t k, per = artifact ? FLOOR_ARTIFACT_PARAMS : FLOOR_EVENT_PARAMS;

	comb_buf_reset(sql);
	if (!artifact)
		comb_buf_puts(sql, "INSERT INTO bench_ingest_floor (community_id, id,"
				   " pubkey, created_at, kind, channel_id, raw) VALUES ");
	else
		comb_buf_puts(sql, "WITH v (community_id, id, pubkey, created_at, kind,"
				   " channel_id, raw, d, type, tags) AS (VALUES ");
	for (k = 0; k < n; k++) {
		size_t p = per * k;

		comb_buf_printf(sql, "%s($%zu::bigint,$%zu,$%zu,$%zu::bigint,$%zu::int,$%zu::uuid,$%zu",
				k ? "," : "", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6, p + 7);
		if (artifact)
			comb_buf_printf(sql, ",$%zu::uuid,$%zu,$%zu::jsonb", p + 8, p + 9, p + 10);
		comb_buf_putc(sql, ')');
	}
	if (artifact)
		comb_buf_puts(sql, "), e AS ("
			" INSERT INTO bench_ingest_floor (community_id, id, pubkey, created_at,"
			"  kind, channel_id, raw, d, type, op)"
			" SELECT community_id, id, pubkey, created_at, kind, channel_id, raw,"
			"  d, type, 'create' FROM v"
			" RETURNING community_id, id, seq)"
			" INSERT INTO bench_floor_heads (community_id, d, revision_id, accepted_seq,"
			"  channel_id, type, creator, tags)"
			" SELECT v.community_id, v.d, v.id, e.seq, v.channel_id, v.type, v.pubkey,"
			"  v.tags FROM v JOIN e USING (community_id, id)");
}

static void *insert_main(void *arg)
{
	struct insert_job *job = arg;
	PGconn *db = connect_db(job->url);
	const char **params = NULL;
	char (*created)[24] = NULL, community[24];
	struct comb_buf sql, *raws = NULL, *tags = NULL;
	size_t i, k, per = job->artifact ? FLOOR_ARTIFACT_PARAMS : FLOOR_EVENT_PARAMS;

	comb_buf_init(&sql, 1 << 20);
	if (!db) {
		job->rc = COMB_EUNAVAIL;
		goto out;
	}
	params = calloc((size_t)job->batch * FLOOR_ARTIFACT_PARAMS, sizeof(*params));
	created = calloc((size_t)job->batch, sizeof(*created));
	raws = calloc((size_t)job->batch, sizeof(*raws));
	tags = calloc((size_t)job->batch, sizeof(*tags));
	if (!params || !created || !raws || !tags) {
		job->rc = COMB_ENOMEM;
		goto out;
	}
	for (k = 0; k < (size_t)job->batch; k++) {
		comb_buf_init(&raws[k], 1 << 20);
		comb_buf_init(&tags[k], 1 << 16);
	}
	snprintf(community, sizeof(community), "%ld", job->l->community);
	for (i = job->from; i < job->to && job->rc == 0; i += (size_t)job->batch) {
		size_t n = job->to - i < (size_t)job->batch ? job->to - i : (size_t)job->batch;
		PGresult *res;

		floor_statement(&sql, n, job->artifact);
		for (k = 0; k < n; k++) {
			struct comb_event *ev = &job->evs[i + k];
			size_t p = per * k;

			comb_buf_reset(&raws[k]);
			comb_event_to_json(ev, &raws[k]);
			snprintf(created[k], sizeof(created[k]), "%lld",
				 (long long)ev->created_at);
			params[p] = community;
			params[p + 1] = ev->id;
			params[p + 2] = ev->pubkey;
			params[p + 3] = created[k];
			params[p + 4] = "45010";
			params[p + 5] = comb_event_tag_value(ev, "h");
			params[p + 6] = raws[k].data;
			if (!job->artifact)
				continue;
			comb_buf_reset(&tags[k]);
			if (bench_head_tags(ev, &tags[k])) {
				job->rc = COMB_ENOMEM;
				break;
			}
			params[p + 7] = comb_event_tag_value(ev, "d");
			params[p + 8] = comb_event_tag_value(ev, "type");
			params[p + 9] = tags[k].data;
		}
		if (job->rc)
			break;
		res = PQexecParams(db, sql.data, (int)(per * n), NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			bench_log("insert-floor: %s", PQresultErrorMessage(res));
			job->rc = COMB_EUNAVAIL;
		}
		PQclear(res);
	}
out:
	for (k = 0; raws && k < (size_t)job->batch; k++)
		comb_buf_release(&raws[k]);
	for (k = 0; tags && k < (size_t)job->batch; k++)
		comb_buf_release(&tags[k]);
	free(tags);
	free(raws);
	free(created);
	free(params);
	comb_buf_release(&sql);
	PQfinish(db);
	return NULL;
}

static int exec_sql(PGconn *db, const char *sql)
{
	PGresult *res = PQexec(db, sql);
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		 PQresultStatus(res) == PGRES_TUPLES_OK;

	if (!ok)
		bench_log("%s: %s", sql, PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : COMB_EUNAVAIL;
}

int bench_cmd_insert_floor(int argc, char **argv)
{
	const char *url = bench_opt(argc, argv, "--db", NULL);
	int conns = (int)bench_opt_long(argc, argv, "--conns", 4);
	int batch = (int)bench_opt_long(argc, argv, "--batch", 64);
	const char *rows = bench_opt(argc, argv, "--rows", "event");
	bool artifact = !strcmp(rows, "artifact");
	struct insert_job jobs[16];
	pthread_t tids[16];
	struct bench_layout l;
	struct comb_event *evs = NULL;
	PGconn *db = NULL;
	PGresult *res;
	long stored = -1;
	size_t n = 0, i;
	double t0, t1 = 0;
	int rc, k;

	if (conns < 1 || conns > 16)
		conns = 4;
	if (batch < 1 || batch > 1000)
		batch = 64;
	rc = bench_layout_from_opts(&l, argc, argv);
	n = (size_t)bench_opt_long(argc, argv, "--events", l.artifacts);
	evs = calloc(n ? n : 1, sizeof(*evs));
	if (rc == 0 && !evs)
		rc = COMB_ENOMEM;
	if (rc == 0)
		rc = bench_ingest_events(&l, "floor", evs, n);
	if (rc == 0 && !(db = url ? connect_db(url) : NULL))
		rc = COMB_EUNAVAIL;
	if (rc == 0)
		rc = exec_sql(db, "SET client_min_messages = warning");
	if (rc == 0)
		rc = exec_sql(db, "DROP TABLE IF EXISTS bench_ingest_floor");
	if (rc == 0)
		rc = exec_sql(db, "CREATE TABLE bench_ingest_floor (LIKE events INCLUDING ALL)");
	/* LIKE copies no storage parameters: give the copy those of events
	 * (toast_tuple_target keeps a stored event in its row) */
	if (rc == 0)
		rc = exec_sql(db,
			      "DO $$ DECLARE o text[]; BEGIN"
			      " SELECT reloptions INTO o FROM pg_class WHERE oid = 'events'::regclass;"
			      " IF o IS NOT NULL THEN"
			      "  EXECUTE format('ALTER TABLE bench_ingest_floor SET (%s)',"
			      "                 array_to_string(o, ', '));"
			      " END IF; END $$");
	/* The heads' copy: their columns, defaults, checks and indexes (LIKE
	 * copies no triggers). */
	if (rc == 0 && artifact)
		rc = exec_sql(db, "DROP TABLE IF EXISTS bench_floor_heads;"
			      " CREATE TABLE bench_floor_heads (LIKE artifact_heads INCLUDING ALL)");
	if (rc)
		goto out;
	t0 = bench_now();
	for (k = 0; k < conns; k++) {
		jobs[k] = (struct insert_job){
			.url = url, .l = &l, .evs = evs, .batch = batch, .artifact = artifact,
			.from = n * (size_t)k / (size_t)conns,
			.to = n * (size_t)(k + 1) / (size_t)conns,
		};
		if (pthread_create(&tids[k], NULL, insert_main, &jobs[k])) {
			rc = COMB_EIO;
			conns = k;
			break;
		}
	}
	for (k = 0; k < conns; k++) {
		pthread_join(tids[k], NULL);
		if (jobs[k].rc)
			rc = jobs[k].rc;
	}
	t1 = bench_now() - t0;
	res = PQexec(db, "SELECT count(*) FROM bench_ingest_floor");
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		stored = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	exec_sql(db, "DROP TABLE IF EXISTS bench_ingest_floor,"
		     " bench_floor_heads");
	if (rc == 0)
		bench_print(json_pack("{s:s,s:s,s:i,s:i,s:i,s:f,s:f,s:i,s:b}",
			"command", "insert-floor", "rows", artifact ? "artifact" : "event",
			"events", (int)n, "conns", conns,
			"batch", batch, "seconds", t1, "events_per_s", (double)n / t1,
			"stored", (int)stored, "ok", stored == (long)n));
out:
	PQfinish(db);
	for (i = 0; evs && i < n; i++)
		comb_event_release(&evs[i]);
	free(evs);
	return rc ? 1 : 0;
}

/* ---- the catch-up floor ---- */

/* The reader's read keys as the relay computes them (policy plugins at
 * policy, a colon list, with an empty configuration) into out, an int[]
 * literal. */
static int reader_keys(const char *policy, const struct bench_layout *l,
		       struct comb_buf *out)
{
	char err[256];
	struct comb_policy_set *set = comb_policy_set_load(policy, "", err, sizeof(err));
	struct comb_policy_actor actor = {.pubkey = l->reader_pk, .community_admin = 0};
	int keys[COMB_POLICY_READ_KEYS], count = 0, i, rc = 0;

	if (!set) {
		bench_log("delta floor: policy %s: %s", policy, err);
		return COMB_EINVAL;
	}
	comb_policy_read_keys(set, &actor, keys, &count);
	comb_policy_set_free(set);
	comb_buf_reset(out);
	rc = comb_buf_puts(out, "{");
	for (i = 0; i < count && rc == 0; i++)
		rc = comb_buf_printf(out, "%s%d", i ? "," : "", keys[i]);
	return rc ? rc : comb_buf_puts(out, "}");
}

/* One run of the floor on db: the change query, then the bytes of its
 * upserts' revisions; rows, revisions and bytes received, seconds taken
 * by each statement. */
static int delta_once(PGconn *db, const char *const params[4], long *rows,
		      long *revisions, long *bytes, double *change_s, double *bytes_s)
{
	struct comb_buf seqs;
	const char *p[1];
	PGresult *res;
	double t0 = bench_now();
	int i, n, rc = 0;

	comb_buf_init(&seqs, 1 << 20);
	res = PQexecParams(db,
		"SELECT c.seq FROM comb_incremental_changes($1::bigint, $2, $3::int[],"
		" '{}'::uuid[], false, NULL::text[], $4::xid8, 0,"
		" '00000000-0000-0000-0000-000000000000'::uuid,"
		" pg_snapshot_xmin(pg_current_snapshot()), 100000) c",
		4, NULL, params, NULL, NULL, 0);
	*change_s = bench_now() - t0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		bench_log("delta floor: %s", PQresultErrorMessage(res));
		PQclear(res);
		comb_buf_release(&seqs);
		return COMB_EUNAVAIL;
	}
	n = PQntuples(res);
	*rows = n;
	*revisions = 0;
	rc = comb_buf_puts(&seqs, "{");
	for (i = 0; i < n && rc == 0; i++) {
		if (PQgetisnull(res, i, 0))
			continue;
		rc = comb_buf_printf(&seqs, "%s%s", *revisions ? "," : "",
				     PQgetvalue(res, i, 0));
		(*revisions)++;
	}
	rc = rc ? rc : comb_buf_puts(&seqs, "}");
	PQclear(res);
	if (rc) {
		comb_buf_release(&seqs);
		return rc;
	}
	p[0] = seqs.data;
	t0 = bench_now();
	res = PQexecParams(db, "SELECT e.raw FROM events e WHERE e.seq = ANY ($1::bigint[])",
			   1, NULL, p, NULL, NULL, 0);
	*bytes_s = bench_now() - t0;
	*bytes = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != *revisions) {
		bench_log("delta floor: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	}
	for (i = 0; rc == 0 && i < PQntuples(res); i++)
		*bytes += PQgetlength(res, i, 0);
	PQclear(res);
	comb_buf_release(&seqs);
	return rc;
}

int bench_delta_floor(const char *url, const char *policy,
		      const struct bench_layout *l, const char *after_xid,
		      int runs, json_t **out)
{
	double change[8], fetch[8], total[8], first = 0;
	long rows = 0, revisions = 0, bytes = 0;
	const char *params[4];
	char community[24];
	struct comb_buf keys;
	json_t *all = NULL;
	PGconn *db = NULL;
	int i, rc;

	*out = NULL;
	if (runs < 1 || runs > 8)
		runs = 3;
	comb_buf_init(&keys, 4096);
	rc = reader_keys(policy, l, &keys);
	if (rc == 0 && !(db = connect_db(url)))
		rc = COMB_EUNAVAIL;
	snprintf(community, sizeof(community), "%ld", l->community);
	params[0] = community;
	params[1] = l->reader_pk;
	params[2] = keys.data;
	params[3] = after_xid;
	all = json_array();
	for (i = 0; i < runs && rc == 0; i++) {
		rc = delta_once(db, params, &rows, &revisions, &bytes, &change[i], &fetch[i]);
		total[i] = change[i] + fetch[i];
		if (i == 0)
			first = total[0];
		json_array_append_new(all, json_real(total[i]));
	}
	if (rc == 0)
		*out = json_pack("{s:f,s:f,s:f,s:f,s:o,s:I,s:I,s:I,s:s}",
			"seconds", bench_quantile(total, (size_t)runs, 0.5),
			"first_s", first,
			"change_query_s", bench_quantile(change, (size_t)runs, 0.5),
			"bytes_query_s", bench_quantile(fetch, (size_t)runs, 0.5),
			"runs", all, "rows", (json_int_t)rows,
			"revisions", (json_int_t)revisions, "bytes", (json_int_t)bytes,
			"read_keys", keys.data);
	else
		json_decref(all);
	PQfinish(db);
	comb_buf_release(&keys);
	return rc;
}
