/*
 * The helpers every kind's writer uses (write_int.h): refusals, database
 * failures, the created_at window, plain statements, storing an event
 * with its tags and handing a run's stored event to live delivery. Below
 * the dispatcher (events.c) and the writers, it calls neither.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/buf.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "feed/feed.h"
#include "readpos/readpos.h"
#include "revcache/revcache.h"
#include "write.h"
#include "write_int.h"

void write_refuse(struct write_result *out, int status, const char *fmt, ...)
{
	va_list ap;

	out->status = status;
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	va_end(ap);
}

void write_db_failed(struct writer *w, struct write_result *out)
{
	if (comb_db_conn_lost(w->db)) {
		w->db_broken = true;
	} else if (w->batched) {
		PQclear(PQexec(w->db, "ROLLBACK TO SAVEPOINT w"));
	} else if (PQtransactionStatus(w->db) != PQTRANS_IDLE) {
		PQclear(PQexec(w->db, "ROLLBACK"));
	}
	write_refuse(out, 503, "error: database unavailable");
}

bool write_is_fresh(const struct writer *w, const struct comb_event *ev)
{
	int64_t now = (int64_t)time(NULL);

	return ev->created_at >= now - w->relay->cfg.created_at_lower_limit &&
	       ev->created_at <= now + w->relay->cfg.created_at_upper_limit;
}

bool write_exec(struct writer *w, const char *sql)
{
	PGresult *res;
	bool ok;

	if (w->batched) {
		if (!strcmp(sql, "BEGIN") || !strcmp(sql, "COMMIT"))
			return true;
		if (!strcmp(sql, "ROLLBACK"))
			sql = "ROLLBACK TO SAVEPOINT w";
	}
	res = PQexec(w->db, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		comb_warn("statement failed: %s", PQresultErrorMessage(res));
	PQclear(res);
	return ok;
}

int write_event_params(const struct writer *w, const struct comb_event *ev,
		       struct event_params *p)
{
	comb_buf_init(&p->raw, 4 * (size_t)w->relay->cfg.max_message_length + 4096);
	p->tags = json_dumps(ev->tags, JSON_COMPACT);
	snprintf(p->created_at, sizeof(p->created_at), "%lld", (long long)ev->created_at);
	return p->tags && comb_event_to_json(ev, &p->raw) == 0 ? 0 : COMB_ENOMEM;
}

void write_event_params_release(struct event_params *p)
{
	free(p->tags);
	p->tags = NULL;
	comb_buf_release(&p->raw);
}

void write_keep_stored(struct writer *w, const char *seq, const struct comb_buf *raw)
{
	revcache_put(w->relay->revisions, strtoll(seq, NULL, 10), raw->data, raw->len);
}

int write_store_event(struct writer *w, const struct comb_event *ev,
		      const char *channel_id, bool *inserted)
{
	static struct comb_db_stmt store = COMB_DB_STMT(
		"SELECT seq, inserted FROM comb_store_event($1, $2, $3, $4, $5,"
		" $6::uuid, $7, $8::json)", 8);
	struct event_params p;
	char kind[16];
	PGresult *res;
	int rc = 0;

	*inserted = false;
	if (write_event_params(w, ev, &p)) {
		rc = COMB_ENOMEM;
		goto out;
	}
	snprintf(kind, sizeof(kind), "%d", ev->kind);
	res = comb_db_exec_stmt(w->relay->db, w->db, &store,
		(const char *const[]){w->community->id_text, ev->id, ev->pubkey,
				      p.created_at, kind, channel_id, p.raw.data,
				      p.tags});
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		comb_warn("storing event failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	} else {
		*inserted = PQgetvalue(res, 0, 1)[0] == 't';
		if (*inserted)
			write_keep_stored(w, PQgetvalue(res, 0, 0), &p.raw);
	}
	PQclear(res);
	if (rc == 0 && *inserted)
		feed_local_stored(w->community, ev, channel_id);
out:
	write_event_params_release(&p);
	return rc;
}

/* The arrays of comb_store_events, in its parameter order. */
enum store_column {
	STORE_COMMUNITY, STORE_ID, STORE_PUBKEY, STORE_CREATED_AT, STORE_KIND,
	STORE_CHANNEL, STORE_RAW, STORE_TAGS, STORE_COLUMNS,
};

/* Fills *p from ev and appends ev's elements to the array literals lit
 * (see enum store_column); the caller releases *p either way. */
static int store_columns_add(const struct writer *w, struct comb_buf *lit,
			     const struct comb_event *ev,
			     const struct community *c, const char *channel,
			     struct event_params *p)
{
	char kind[16];
	int rc = write_event_params(w, ev, p);

	snprintf(kind, sizeof(kind), "%d", ev->kind);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_COMMUNITY], c->id_text);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_ID], ev->id);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_PUBKEY], ev->pubkey);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_CREATED_AT], p->created_at);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_KIND], kind);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_CHANNEL], channel);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_RAW], p->raw.data);
	rc = rc ? rc : comb_buf_pg_array_item(&lit[STORE_TAGS], p->tags);
	return rc;
}

int write_store_events(struct writer *w, const struct comb_event *const *evs,
		       const struct community *const *communities,
		       const char *const *channels, size_t n, bool *inserted)
{
	static struct comb_db_stmt store = COMB_DB_STMT(
		"SELECT seq, inserted FROM comb_store_events($1::bigint[],"
		" $2::text[], $3::text[], $4::bigint[], $5::integer[], $6::uuid[],"
		" $7::text[], $8::json[])", 8);
	/* Each raw event and its tags may double when escaped. */
	size_t max = n * (16 * (size_t)w->relay->cfg.max_message_length + 16384);
	struct event_params *ps = calloc(n ? n : 1, sizeof(*ps));
	struct comb_buf lit[STORE_COLUMNS];
	const char *params[STORE_COLUMNS];
	PGresult *res = NULL;
	size_t i, filled = 0;
	int rc = ps ? 0 : COMB_ENOMEM, k;

	for (k = 0; k < STORE_COLUMNS; k++) {
		comb_buf_init(&lit[k], max);
		rc = rc ? rc : comb_buf_putc(&lit[k], '{');
	}
	for (i = 0; i < n && rc == 0; i++, filled++)
		rc = store_columns_add(w, lit, evs[i], communities[i], channels[i], &ps[i]);
	for (k = 0; k < STORE_COLUMNS && rc == 0; k++) {
		rc = comb_buf_putc(&lit[k], '}');
		params[k] = lit[k].data;
	}
	if (rc) {
		rc = COMB_ENOMEM;
		goto out;
	}
	res = comb_db_exec_stmt(w->relay->db, w->db, &store, params);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != (int)n) {
		comb_warn("storing events failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
		goto out;
	}
	for (i = 0; i < n; i++) {
		inserted[i] = PQgetvalue(res, (int)i, 1)[0] == 't';
		if (inserted[i])
			write_keep_stored(w, PQgetvalue(res, (int)i, 0), &ps[i].raw);
	}
out:
	PQclear(res);
	for (k = 0; k < STORE_COLUMNS; k++)
		comb_buf_release(&lit[k]);
	for (i = 0; i < filled; i++)
		write_event_params_release(&ps[i]);
	free(ps);
	return rc;
}

void write_note_position(struct relay *relay, PGconn *db,
			 const struct community *c, const char *const *authors,
			 size_t n)
{
	PGresult *res;
	comb_lsn lsn = 0;

	if (comb_read_standbys(relay->reads) == 0 || n == 0)
		return;
	res = PQexec(db, "SELECT " COMB_READ_POSITION_SQL);
	if (PQresultStatus(res) != PGRES_TUPLES_OK ||
	    comb_lsn_parse(PQgetvalue(res, 0, 0), &lsn)) {
		comb_warn("write: the WAL position after a commit is unknown: %s",
			  PQresultErrorMessage(res));
		PQclear(res);
		return;
	}
	PQclear(res);
	if (readpos_record(relay, c, authors, n, lsn))
		comb_warn("write: Redis did not keep the writes' read position");
}

void write_item_deliver(struct write_item *it, bool inserted, const char *h)
{
	feed_local_begin();
	if (inserted)
		feed_local_stored(it->community, it->ev, h);
	it->live = feed_local_take(it->community, it->ev, it->out->status == 200);
}
