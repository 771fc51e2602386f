/*
 * Stored events' bytes by events.seq, for answers that first decide in
 * one statement which events to send (sync snapshots, plain REQs,
 * /query, incremental pages) and then send them (see read.h). An event's
 * bytes never change once written and events are never deleted, so
 * fetching them after the snapshot sends exactly what it decided. They
 * come a batch at a time, from the revision cache (revcache.h) and with
 * one statement for the batch's misses (which the cache then keeps), each
 * batch handed out before the next is fetched (the cache's bytes where
 * the cache holds them, pinned until the batch is done, not copied): the
 * client gets the first events while later ones are still in PostgreSQL,
 * memory stays bounded by one batch (about BATCH_BYTES, at least
 * BATCH_MIN events) whatever the set's size, and no database connection
 * is held while the client reads (unless the caller holds one anyway and
 * lends it, see read.h).
 */
#include "read.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "comb/error.h"
#include "comb/log.h"
#include "relay.h"
#include "revcache/revcache.h"

#define BATCH_MIN 16
#define BATCH_MAX 1024
#define BATCH_BYTES (1024 * 1024)

/* An event of the batch whose bytes the cache did not have. */
struct miss {
	int64_t seq;
	size_t at;                 /* in the batch */
};

/* An event of the batch. */
struct item {
	const char *bytes;         /* once all are in */
	size_t len;
	bool pinned;               /* bytes pinned in the revision cache */
};

/* Room for cap events: as many as the set has, at most BATCH_MAX. */
struct batch {
	struct miss *misses;       /* room for cap, after items */
	struct item items[];
};

static int miss_cmp(const void *a, const void *b)
{
	const struct miss *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Reads the bytes of b's nmiss misses (sorted by seq) with one statement
 * into *res (the caller clears it) on held, or else on a pooled
 * connection given back at once, points b's events at them and keeps
 * them in the revision cache. */
static int fetch_misses(struct relay *relay, const struct event_source *src,
			struct batch *b, size_t nmiss, PGresult **res, char *why,
			size_t whylen)
{
	static struct comb_db_stmt stmt = COMB_DB_STMT(
		"SELECT seq, raw FROM events WHERE seq = ANY ($1::bigint[]) ORDER BY seq", 1);
	struct comb_buf list;
	const char *params[1];
	struct comb_read_lease lease = {0};
	struct comb_db_pool *pool = src->held ? src->pool : relay->db;
	PGconn *db = src->held;
	size_t i;
	int rc = 0, row;

	comb_buf_init(&list, nmiss * 21 + 2);
	for (i = 0; i < nmiss && rc == 0; i++)
		rc = comb_buf_printf(&list, "%c%" PRId64, i ? ',' : '{', b->misses[i].seq);
	if (rc || comb_buf_putc(&list, '}')) {
		rc = comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
		goto out;
	}
	params[0] = list.data;
	if (!db && src->routed && !comb_read_acquire(relay->reads, src->at_least, 2000, &lease)) {
		db = lease.conn;
		pool = lease.pool;
	} else if (!db && !src->routed) {
		db = comb_db_acquire(relay->db, 2000);
	}
	if (!db) {
		rc = comb_fail(why, whylen, COMB_EUNAVAIL, "error: database unavailable");
		goto out;
	}
	*res = comb_db_exec_stmt(pool, db, &stmt, params);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
		if (comb_db_is_error(*res, "57014")) {
			rc = comb_fail(why, whylen, COMB_EUNAVAIL, "error: query budget exceeded");
		} else {
			comb_warn("reading stored events failed: %s", PQresultErrorMessage(*res));
			rc = comb_fail(why, whylen, COMB_EUNAVAIL, "error: database unavailable");
		}
	}
	if (lease.conn)
		comb_read_release(relay->reads, &lease, rc && comb_db_conn_lost(db));
	else if (!src->held)
		comb_db_release(relay->db, db, rc && comb_db_conn_lost(db));
	if (rc)
		goto out;
	if ((size_t)PQntuples(*res) != nmiss) {
		comb_warn("reading stored events: %d of %zu found", PQntuples(*res), nmiss);
		rc = comb_fail(why, whylen, COMB_EUNAVAIL, "error: database unavailable");
		goto out;
	}
	for (row = 0; row < PQntuples(*res); row++) {
		size_t at = b->misses[row].at;

		b->items[at].bytes = PQgetvalue(*res, row, 1);
		b->items[at].len = (size_t)PQgetlength(*res, row, 1);
		revcache_put(relay->revisions, b->misses[row].seq, b->items[at].bytes,
			     b->items[at].len);
	}
out:
	comb_buf_release(&list);
	return rc;
}

int read_events_from(struct relay *relay, const struct event_source *src,
		     const int64_t *seqs, size_t n, event_bytes_fn emit,
		     void *ctx, char *why, size_t whylen)
{
	size_t sent = 0, size = BATCH_MIN, cap, k, j, nmiss, bytes;
	struct batch *b;
	int rc = 0;

	if (n == 0)
		return 0;  /* a page of removals only, or nothing: no batch */
	cap = n < BATCH_MAX ? n : BATCH_MAX;
	b = malloc(sizeof(*b) + cap * (sizeof(struct item) + sizeof(struct miss)));
	if (!b)
		return comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
	b->misses = (struct miss *)(void *)(b->items + cap);
	while (sent < n && rc == 0) {
		PGresult *res = NULL;

		k = n - sent < size ? n - sent : size;  /* at most cap */
		nmiss = 0;
		for (j = 0; j < k; j++) {
			struct item *it = &b->items[j];

			it->bytes = revcache_pin(relay->revisions, seqs[sent + j], &it->len);
			it->pinned = it->bytes != NULL;
			if (!it->pinned)
				b->misses[nmiss++] = (struct miss){seqs[sent + j], j};
		}
		if (nmiss) {
			qsort(b->misses, nmiss, sizeof(b->misses[0]), miss_cmp);
			rc = fetch_misses(relay, src, b, nmiss, &res, why, whylen);
		}
		for (j = 0, bytes = 0; j < k && rc == 0; j++) {
			rc = emit(ctx, b->items[j].bytes, b->items[j].len, why, whylen);
			bytes += b->items[j].len;
		}
		for (j = 0; j < k; j++)
			if (b->items[j].pinned)
				revcache_unpin(relay->revisions, b->items[j].bytes);
		PQclear(res);
		sent += k;
		/* Size the next batch to about BATCH_BYTES of these events. */
		size = BATCH_BYTES / (bytes / k + 1);
		size = size < BATCH_MIN ? BATCH_MIN : size > BATCH_MAX ? BATCH_MAX : size;
	}
	free(b);
	return rc;
}

void read_misses_source_of(struct relay *relay, const struct comb_read_lease *lease,
			   struct event_source *src)
{
	PGresult *res;
	comb_lsn lsn;

	*src = (struct event_source){.pool = relay->db};
	if (!lease->conn || lease->server < 0)
		return;
	res = PQexec(lease->conn, "SELECT " COMB_READ_POSITION_SQL);
	if (PQresultStatus(res) == PGRES_TUPLES_OK &&
	    !comb_lsn_parse(PQgetvalue(res, 0, 0), &lsn))
		*src = (struct event_source){.routed = true, .at_least = lsn};
	PQclear(res);
}

void read_misses_source(struct request *req, struct event_source *src)
{
	if (!req->db)
		*src = (struct event_source){.pool = req->relay->db};
	else
		read_misses_source_of(req->relay, &req->read, src);
}
