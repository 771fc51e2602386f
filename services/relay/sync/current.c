/*
 * Opening artifact syncs (see sync.h) and the registry the capture feed
 * finds them in.
 *
 * Order of an open: the filter is checked; the sync registers with the hub
 * under each of its channels, so that from then on every signal of those
 * channels is held for it; the community's feed must be trusted (feed/feed.h);
 * then one REPEATABLE READ READ ONLY transaction checks that the reader
 * may read every channel, counts the set and reads its (d, accepted_seq)
 * ordered by d, remembering per d the accepted_seq sent; then, with no
 * database connection held, the revisions' bytes are fetched a batch at a
 * time (revision cache, then PostgreSQL) and streamed out as the client
 * reads (see "the snapshot" below); if the feed stayed trusted and nothing
 * overflowed, EOSE; then its turns on the hub's workers (apply.c) apply
 * what was held and whatever comes. A change committed after the snapshot began
 * reaches the sync as a signal (or the feed is interrupted and the sync
 * closed), and re-reading an artifact sends it only when it is newer than
 * what the client holds, so the client's set stays exact.
 */
#include "sync.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "comb/uuid.h"
#include "feed/feed.h"
#include "metrics/metrics.h"
#include "proto/proto.h"
#include "read/read.h"
#include "readpos/readpos.h"
#include "sync_int.h"

/* ------------------------------------------------------------------ */
/* the filter */

static void sub_free(struct sync_sub *sub)
{
	size_t i;

	if (!sub)
		return;
	metrics_add(METRIC_SYNCS, -1);
	for (i = 0; i < sub->ntypes; i++)
		free(sub->types[i]);
	free(sub->types);
	free(sub->channels);
	ws_held_map_release(&sub->dfilter);
	ws_held_map_release(&sub->known);
	free(sub);
}

static void sub_release(struct ws_session *s, struct ws_sub *base)
{
	struct sync_sub *sub = (struct sync_sub *)base;

	(void)s;
	hub_sub_remove(&sub->head.hub);
	ws_held_map_release(&sub->pending);
	ws_held_map_release(&sub->taken);
	sub_free(sub);
}

/* Copies the parsed filter into sub. */
static int copy_filter(struct sync_sub *sub, const struct artifact_filter *f)
{
	size_t i, n = json_array_size(f->h);
	uint8_t d[16];

	sub->channels = calloc(n, sizeof(*sub->channels));
	if (!sub->channels)
		return COMB_ENOMEM;
	for (i = 0; i < n; i++)
		snprintf(sub->channels[i], sizeof(sub->channels[i]), "%s",
			 json_string_value(json_array_get(f->h, i)));
	qsort(sub->channels, n, sizeof(*sub->channels), sync_cmp_channel);
	for (i = 0; i < n; i++) {
		if (sub->nchannels && !strcmp(sub->channels[sub->nchannels - 1],
					      sub->channels[i]))
			continue;
		memmove(sub->channels[sub->nchannels++], sub->channels[i],
			sizeof(sub->channels[i]));
	}
	if (f->type) {
		n = json_array_size(f->type);
		sub->types = calloc(n, sizeof(*sub->types));
		if (!sub->types)
			return COMB_ENOMEM;
		for (i = 0; i < n; i++) {
			sub->types[i] = strdup(json_string_value(json_array_get(f->type, i)));
			if (!sub->types[i])
				return COMB_ENOMEM;
			sub->ntypes++;
		}
		qsort(sub->types, sub->ntypes, sizeof(*sub->types), sync_cmp_type);
	}
	if (f->d) {
		n = json_array_size(f->d);
		ws_held_map_init(&sub->dfilter, 16, n, NULL);
		sub->has_dfilter = true;
		for (i = 0; i < n; i++) {
			if (comb_uuid_parse(json_string_value(json_array_get(f->d, i)), d) ||
			    ws_held_map_put(&sub->dfilter, d, 0))
				return COMB_ENOMEM;
		}
	}
	return 0;
}

static struct sync_sub *sub_new(struct ws_session *s, const char *id,
				const json_t *filter, char *why, size_t whylen)
{
	const struct comb_config *cfg = &s->relay->cfg;
	struct artifact_filter f;
	struct sync_sub *sub;
	char err[200];

	/* Only these keys: anything else could let an artifact leave the set
	 * through an edit without the client being told. */
	static const char *const keys[] = {"artifact", "kinds", "#h", "#type", "#d", NULL};

	if (sync_check_keys(filter, keys, "a sync", "#h, #type, #d and kinds", why, whylen))
		return NULL;
	if (artifact_filter_parse(filter, cfg->max_limit, &f, err, sizeof(err))) {
		snprintf(why, whylen, "invalid: %s", err);
		return NULL;
	}
	if (f.mode != ARTIFACT_MODE_CURRENT || !f.h) {
		snprintf(why, whylen, "invalid: a sync is one \"current\" filter with #h");
		return NULL;
	}
	sub = calloc(1, sizeof(*sub));
	if (!sub) {
		snprintf(why, whylen, "error: out of memory");
		return NULL;
	}
	metrics_add(METRIC_SYNCS, 1);
	sub->community = s->community.id;
	ws_held_map_init(&sub->known, 16, (size_t)cfg->sync_max_events, s);
	if (copy_filter(sub, &f)) {
		sub_free(sub);
		snprintf(why, whylen, "error: out of memory");
		return NULL;
	}
	ws_sub_init(&sub->head, s, id, &sync_current_kind,
		    (const char (*)[37])sub->channels, sub->nchannels, sub_release);
	sync_pending_init(sub);
	return sub;
}

/* ------------------------------------------------------------------ */
/* the snapshot */

/* sub's channels (canonical uuids) as a uuid[] literal. */
static int channels_literal(struct comb_buf *b, const struct sync_sub *sub)
{
	size_t i;
	int rc = comb_buf_putc(b, '{');

	for (i = 0; i < sub->nchannels && rc == 0; i++)
		rc = comb_buf_printf(b, "%s%s", i ? "," : "", sub->channels[i]);
	return rc ? rc : comb_buf_putc(b, '}');
}

static int d_literal(struct comb_buf *b, const struct ws_held_map *m)
{
	struct ws_held_visit v = WS_HELD_VISIT;
	const unsigned char *d;
	char text[37];
	size_t k = 0;
	int rc = comb_buf_putc(b, '{');

	while (rc == 0 && (d = ws_held_map_next(m, &v))) {
		comb_uuid_format(d, text);
		rc = comb_buf_printf(b, "%s%s", k++ ? "," : "", text);
	}
	return rc ? rc : comb_buf_putc(b, '}');
}

static void set_failure(PGresult *res, char *why, size_t whylen)
{
	if (comb_db_is_error(res, "57014")) {
		snprintf(why, whylen, "error: query budget exceeded");
	} else {
		comb_warn("sync snapshot failed: %s", PQresultErrorMessage(res));
		snprintf(why, whylen, "error: database unavailable");
	}
}

#define SET_WHERE \
	" WHERE h.community_id = $1 AND h.channel_id = ANY ($2::uuid[])" \
	" AND NOT h.deleted AND NOT h.redacted" \
	" AND ($3::text[] IS NULL OR h.type = ANY ($3::text[]))" \
	" AND ($4::uuid[] IS NULL OR h.d = ANY ($4::uuid[]))"

/*
 * The snapshot on its way out. The snapshot itself only decides which
 * revision of each artifact the client gets: (d, accepted_seq) ordered by
 * d, in the same transaction as the access checks. Their bytes are
 * fetched afterwards and pushed as the client makes room
 * (read_events_from, read/read.h): memory stays bounded by one batch
 * plus the outbox whatever the set's size, and no database connection is
 * held while the client reads.
 */
struct stream {
	struct sync_sub *sub;
	int64_t *seqs;             /* the set's revisions, in d order */
	size_t n;
	struct ws_event_batch batch;  /* frames not pushed yet */
	struct event_source bytes;    /* where the revision cache's misses
				       * are read: a server that has them */
};

/* Reads the big-endian 64-bit integer at p (a binary int8 column). */
static int64_t int8_at(const char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | (unsigned char)p[i];
	return (int64_t)v;
}

/* Phase one, inside the snapshot: the set's (d, accepted_seq) in d order,
 * remembered as what the client will hold; a set larger than
 * COMB_SYNC_MAX_EVENTS is refused (one row more is read to tell). The rows
 * come in binary, so that thousands of them cost no text conversions. */
static int stream_plan(PGconn *db, struct stream *st, const char *const *params,
		       char *why, size_t whylen)
{
	struct sync_sub *sub = st->sub;
	long max = sub->head.session->relay->cfg.sync_max_events;
	const char *values[5] = {params[0], params[1], params[2], params[3]};
	char limit[24];
	PGresult *res;
	int rc = 0, row, rows;

	snprintf(limit, sizeof(limit), "%ld", max + 1);
	values[4] = limit;
	res = PQexecParams(db, "SELECT h.d, h.accepted_seq FROM artifact_heads h"
			   SET_WHERE " ORDER BY h.d LIMIT $5", 5, NULL, values, NULL,
			   NULL, 1);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != 2) {
		set_failure(res, why, whylen);
		PQclear(res);
		return COMB_EUNAVAIL;
	}
	rows = PQntuples(res);
	if (rows > max) {
		PQclear(res);
		snprintf(why, whylen, "invalid: sync set too large");
		return COMB_ETOOBIG;
	}
	st->seqs = malloc(((size_t)rows + 1) * sizeof(*st->seqs));
	if (!st->seqs)
		rc = COMB_ENOMEM;
	for (row = 0; row < rows && rc == 0; row++) {
		int64_t seq;

		if (PQgetlength(res, row, 0) != 16 || PQgetlength(res, row, 1) != 8)
			continue;
		seq = int8_at(PQgetvalue(res, row, 1));
		rc = ws_held_map_put(&sub->known, (const unsigned char *)PQgetvalue(res, row, 0), seq);
		st->seqs[st->n++] = seq;
	}
	PQclear(res);
	if (rc == COMB_EDENIED) {
		snprintf(why, whylen, "%s", WS_BUDGET_EXCEEDED);
		return COMB_ETOOBIG;
	}
	if (rc) {
		snprintf(why, whylen, "error: out of memory");
		return COMB_ENOMEM;
	}
	return 0;
}

/*
 * Opens sub's snapshot on db (borrowed from pool) and reads its
 * community's access epoch there, which the sync keeps once every
 * channel is found readable in it (sync_int.h), and the snapshot's WAL
 * position, below which none of its re-reads runs. Returns 0, or
 * COMB_EUNAVAIL with the CLOSED message in why.
 */
static int begin_with_epoch(struct sync_sub *sub, struct comb_db_pool *pool,
			    PGconn *db, char *why, size_t whylen)
{
	char ids[32];
	const char *param = ids;
	const struct comb_db_step steps[] = {
		{.sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"},
		{.stmt = &sync_epochs_stmt, .params = &param},
	};
	PGresult *results[2];
	int rc = 0;

	snprintf(ids, sizeof(ids), "{%" PRId64 "}", sub->community);
	if (comb_db_exec_together(pool, db, steps, 2, results) == 0 &&
	    PQntuples(results[1]) == 1) {
		sub->access_epoch = strtoll(PQgetvalue(results[1], 0, 1), NULL, 10);
		sub->seen_lsn = sync_epochs_position(results[1]);
	} else {
		set_failure(PQresultStatus(results[0]) == PGRES_COMMAND_OK ?
			    results[1] : results[0], why, whylen);
		rc = COMB_EUNAVAIL;
	}
	PQclear(results[0]);
	PQclear(results[1]);
	return rc;
}

/*
 * Decides sub's set in one snapshot, on a server at WAL position `at` or
 * later (a standby or the primary, readpos_borrow): its revisions into st
 * (ordered by d), and where their bytes are read. Returns 0, or a negative
 * COMB_E* with the CLOSED message in why.
 */
static int snapshot(struct sync_sub *sub, struct stream *st, comb_lsn at,
		    char *why, size_t whylen)
{
	struct ws_session *s = sub->head.session;
	struct comb_buf channels, types, ds;
	struct access_probe *probes = NULL;
	struct comb_read_lease lease;
	const char *params[4];
	PGresult *res = NULL;
	PGconn *db;
	bool budget = false, broken = false;
	size_t i;
	int rc = 0;

	comb_buf_init(&channels, sub->nchannels * 40 + 8);
	comb_buf_init(&types, 4 * COMB_MAX_TAG_BYTES + 8 * COMB_MAX_VALUES + 8);
	comb_buf_init(&ds, sub->dfilter.count * 40 + 8);
	probes = calloc(sub->nchannels, sizeof(*probes));
	if (!probes || channels_literal(&channels, sub) ||
	    (sub->types && comb_buf_pg_array(&types, (const char *const *)sub->types,
					      sub->ntypes)) ||
	    (sub->has_dfilter && d_literal(&ds, &sub->dfilter))) {
		snprintf(why, whylen, "error: out of memory");
		rc = COMB_ENOMEM;
		goto out_nodb;
	}
	params[0] = s->community.id_text;
	params[1] = channels.data;
	params[2] = sub->types ? types.data : NULL;
	params[3] = sub->has_dfilter ? ds.data : NULL;

	if (readpos_borrow(s->relay, &s->community, s->pubkey, at, 2000, &lease)) {
		snprintf(why, whylen, "error: database unavailable");
		rc = COMB_EUNAVAIL;
		goto out_nodb;
	}
	db = lease.conn;
	rc = begin_with_epoch(sub, lease.pool, db, why, whylen);
	if (rc)
		goto out;
	for (i = 0; i < sub->nchannels; i++)
		probes[i] = (struct access_probe){
			.community = sub->community,
			.channel = sub->channels[i],
			.reader = s->pubkey,
			.access = &s->access,
			.named = true,  /* every channel of a sync is in #h */
		};
	rc = access_probe_all(lease.pool, db, probes, sub->nchannels, NULL,
			       &budget);
	if (rc) {
		snprintf(why, whylen, "%s", budget ? "error: query budget exceeded" :
			 rc == COMB_ENOMEM ? "error: out of memory" :
			 "error: database unavailable");
		goto out;
	}
	for (i = 0; i < sub->nchannels; i++) {
		if (!probes[i].readable) {
			snprintf(why, whylen, "restricted: not a channel member");
			rc = COMB_EDENIED;
			goto out;
		}
	}
	rc = stream_plan(db, st, params, why, whylen);
	if (rc)
		goto out;
	res = PQexec(db, "COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		set_failure(res, why, whylen);
		rc = COMB_EUNAVAIL;
	}
	PQclear(res);
	if (rc == 0)
		read_misses_source_of(s->relay, &lease, &st->bytes);
out:
	broken = rc && comb_db_conn_lost(db);
	comb_read_release(s->relay->reads, &lease, broken);
out_nodb:
	free(probes);
	comb_buf_release(&channels);
	comb_buf_release(&types);
	comb_buf_release(&ds);
	return rc;
}

/* After the rows: EOSE when the set is still exact, else CLOSED; then its
 * turns apply what was held and whatever comes. */
static void finish(struct sync_sub *sub, uint64_t generation)
{
	const char *overflow = sync_overflowed(sub);

	if (overflow)
		ws_sub_close(&sub->head, overflow);
	if (ws_sub_open_end(&sub->head, generation))
		hub_sub_start(&sub->head.hub, false);
}

void ws_sync_open(struct ws_session *s, const char *sub_id,
		  const json_t *filter)
{
	struct stream st = {0};
	struct sync_sub *sub;
	uint64_t generation;
	comb_lsn at;
	char why[300];
	double t0 = hub_now_ms(), t1, t2;
	int rc;

	if (!hub_running()) {
		ws_send_closed(s, sub_id, "error: sync unavailable", WS_PUSH_WAIT);
		return;
	}
	sub = sub_new(s, sub_id, filter, why, sizeof(why));
	if (!sub) {
		ws_send_closed(s, sub_id, why, WS_PUSH_WAIT);
		return;
	}
	if (!ws_sub_open_begin(&sub->head, &generation))
		return;
	/* the snapshot is read at the primary's position of this moment or
	 * later: what committed before the registration is in it */
	if (ws_session_access_now(s, &at)) {
		ws_sub_refuse(&sub->head, "error: database unavailable");
		return;
	}
	t1 = hub_now_ms();
	ws_event_batch_init(&st.batch, s, sub->head.id, WS_PUSH_WAIT | WS_PUSH_STREAM);
	st.sub = sub;
	rc = snapshot(sub, &st, at, why, sizeof(why));
	t2 = hub_now_ms();
	if (rc == 0)
		rc = read_events_from(s->relay, &st.bytes, st.seqs, st.n, ws_event_batch_add,
				      &st.batch, why, sizeof(why));
	if (rc == 0)
		rc = ws_event_batch_flush(&st.batch, why, sizeof(why));
	comb_debug("sync %s: %zu artifacts (rc %d); feed wait %.1f ms, snapshot %.1f ms, sending %.1f ms",
		   sub->head.id, st.n, rc, t1 - t0, t2 - t1, hub_now_ms() - t2);
	free(st.seqs);
	ws_event_batch_release(&st.batch);
	if (rc == COMB_EIO) {
		ws_session_drop_sub(s, &sub->head);  /* the connection is closing */
		return;
	}
	if (rc) {
		ws_sub_refuse(&sub->head, why);
		return;
	}
	finish(sub, generation);
}
