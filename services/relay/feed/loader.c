/*
 * From event signals to live events (see feed.h): the loader thread that
 * lets plain live REQs on this node see what was written through any node.
 *
 * The feed thread only queues. The loader takes everything queued, loads
 * the JSON of the stored events among it with one query (a stored event by
 * id; an artifact revision by id; the kind-45011 marker of a move or of a
 * redaction through artifact_moves or artifact_redactions) on a server
 * that has replayed every signal's position (a standby of the node, else
 * the primary), and hands the events to ws_live in the order the signals
 * arrived, ephemeral events straight from their payload, each with its
 * signal's position for the access check. Events deleted or redacted by then are
 * skipped, as a stored read would skip them. Access is ws_live's business:
 * it checks every recipient at delivery.
 */
#include "feed.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "feed_int.h"
#include "hub/hub.h"
#include "revcache.h"

/* Signals waiting for the loader beyond which live delivery of the
 * community is interrupted instead of queued. */
#define MAX_BACKLOG 65536
/* Signals loaded with one query. */
#define BATCH 512

struct litem {
	struct litem *next;
	int64_t community;
	unsigned type;
	unsigned kind;
	char channel[37];
	char id[65];
	comb_lsn at;               /* the signal's position (COMB_READ_PRIMARY:
				    * unknown) */
	const char *json;          /* loaded or the payload; NULL: skip */
	size_t len;
	size_t payload_len;
	unsigned char payload[];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct litem *head, *tail;
	long backlog;
	bool stop;
	atomic_bool started;
	pthread_t thread;
	struct relay *relay;
} loader = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

void feed_live_push(const struct comb_signal *s)
{
	const char *channel = s->channel[0] ? s->channel : NULL;
	struct litem *it;
	bool full;

	if (!atomic_load(&loader.started))
		return;
	if (s->type != COMB_SIGNAL_EPHEMERAL && !s->id[0])
		return;  /* nothing to load */
	if (!hub_wanted(s->community, channel))
		return;
	it = calloc(1, sizeof(*it) + s->payload_len + 1);
	if (!it) {
		hub_interrupt_events(s->community, "error: live delivery out of memory");
		return;
	}
	it->community = s->community;
	it->at = s->lsn ? s->lsn : COMB_READ_PRIMARY;
	it->type = s->type;
	it->kind = s->kind;
	memcpy(it->channel, s->channel, sizeof(it->channel));
	memcpy(it->id, s->id, sizeof(it->id));
	it->payload_len = s->payload_len;
	if (s->payload_len)
		memcpy(it->payload, s->payload, s->payload_len);
	pthread_mutex_lock(&loader.mu);
	full = loader.backlog >= MAX_BACKLOG;
	if (!full) {
		if (loader.tail)
			loader.tail->next = it;
		else
			loader.head = it;
		loader.tail = it;
		loader.backlog++;
		pthread_cond_signal(&loader.cond);
	}
	pthread_mutex_unlock(&loader.mu);
	if (full) {
		free(it);
		comb_warn("feed: live loader backlog full, community %" PRId64
			  " interrupted", s->community);
		hub_interrupt_events(s->community, FEED_INTERRUPTED);
	}
}

/* What the query looks up for an item: 1 the event itself, 2 the marker
 * of the move whose revision is id, 3 the marker of the redaction of id. */
static int lookup_of(const struct litem *it)
{
	switch (it->type) {
	case COMB_SIGNAL_MOVE: return 2;
	case COMB_SIGNAL_REDACTION: return 3;
	default: return 1;
	}
}

static unsigned kind_of(const struct litem *it)
{
	switch (it->type) {
	case COMB_SIGNAL_HEAD: return 45010;
	case COMB_SIGNAL_MOVE:
	case COMB_SIGNAL_REDACTION: return 45011;
	default: return it->kind;
	}
}

/* Interrupts the live subscriptions of every community in the batch. */
static void interrupt_batch(struct litem *batch, const char *reason)
{
	struct litem *it;
	int64_t last = 0;

	for (it = batch; it; it = it->next) {
		if (it->community != last)
			hub_interrupt_events(it->community, reason);
		last = it->community;
	}
}

/* The statement that loads the stored items: $1 communities, $2 ids, $3
 * what to look up (lookup_of). */
static struct comb_db_stmt load_stmt = COMB_DB_STMT(
	"SELECT q.i, e.raw, e.seq"
	" FROM unnest($1::bigint[], $2::text[], $3::int[]) WITH ORDINALITY"
	"  AS q(cid, id, what, i)"
	" LEFT JOIN artifact_moves mv ON q.what = 2"
	"  AND mv.community_id = q.cid AND mv.revision_id = q.id"
	" LEFT JOIN artifact_redactions rd ON q.what = 3"
	"  AND rd.community_id = q.cid AND rd.revision_id = q.id"
	" JOIN events e ON e.community_id = q.cid AND e.id = CASE q.what"
	"  WHEN 2 THEN mv.marker_id WHEN 3 THEN rd.marker_id ELSE q.id END"
	" WHERE NOT e.deleted AND NOT e.redacted", 3);

/*
 * Runs the load statement with params on a server that has replayed
 * position at; a load a standby fails runs again on the primary. Returns
 * the result (the caller checks and clears it), or NULL when no server
 * could lend a connection.
 */
static PGresult *load_at(comb_lsn at, const char *const *params)
{
	struct comb_read_lease lease;
	PGresult *res = NULL;
	int attempt;

	bool on_standby;

	for (attempt = 0; attempt < 2; attempt++) {
		if (comb_read_acquire(loader.relay->reads, at, 2000, &lease))
			return res;
		PQclear(res);
		res = comb_db_exec_stmt(lease.pool, lease.conn, &load_stmt, params);
		on_standby = lease.server >= 0;
		comb_read_release(loader.relay->reads, &lease,
				  PQresultStatus(res) != PGRES_TUPLES_OK &&
				  comb_db_conn_lost(lease.conn));
		if (PQresultStatus(res) == PGRES_TUPLES_OK || !on_standby)
			break;
		at = COMB_READ_PRIMARY;
	}
	return res;
}

/*
 * Loads the JSON of every stored item of batch (n items) into it->json,
 * pointing into *res (the caller clears it). Returns 0, or a negative
 * COMB_E* after which nothing was loaded.
 */
static int load(struct litem *batch, size_t n, PGresult **res)
{
	struct comb_buf cids, ids, what;
	struct litem **index = NULL;
	struct litem *it;
	comb_lsn at = 0;
	size_t k = 0;
	int rc = 0, row;

	comb_buf_init(&cids, n * 24 + 8);
	comb_buf_init(&ids, n * 66 + 8);
	comb_buf_init(&what, n * 3 + 8);
	index = calloc(n ? n : 1, sizeof(*index));
	if (!index)
		rc = COMB_ENOMEM;
	rc = rc ? rc : comb_buf_putc(&cids, '{');
	rc = rc ? rc : comb_buf_putc(&ids, '{');
	rc = rc ? rc : comb_buf_putc(&what, '{');
	for (it = batch; it && rc == 0; it = it->next) {
		if (it->type == COMB_SIGNAL_EPHEMERAL)
			continue;
		rc = comb_buf_printf(&cids, "%s%" PRId64, k ? "," : "", it->community);
		rc = rc ? rc : comb_buf_printf(&ids, "%s%s", k ? "," : "", it->id);
		rc = rc ? rc : comb_buf_printf(&what, "%s%d", k ? "," : "", lookup_of(it));
		if (it->at > at)
			at = it->at;
		index[k++] = it;
	}
	rc = rc ? rc : comb_buf_putc(&cids, '}');
	rc = rc ? rc : comb_buf_putc(&ids, '}');
	rc = rc ? rc : comb_buf_putc(&what, '}');
	if (rc || k == 0)
		goto out;
	*res = load_at(at, (const char *const[]){cids.data, ids.data, what.data});
	if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
		comb_warn("feed: loading live events failed: %s",
			  *res ? PQresultErrorMessage(*res) : "no database connection");
		rc = COMB_EUNAVAIL;
		goto out;
	}
	for (row = 0; row < PQntuples(*res); row++) {
		long i = strtol(PQgetvalue(*res, row, 0), NULL, 10);

		if (i >= 1 && (size_t)i <= k) {
			index[i - 1]->json = PQgetvalue(*res, row, 1);
			index[i - 1]->len = (size_t)PQgetlength(*res, row, 1);
		}
		/* The new event's bytes, for the reads that follow. */
		revcache_put(loader.relay->revisions,
			     strtoll(PQgetvalue(*res, row, 2), NULL, 10),
			     PQgetvalue(*res, row, 1),
			     (size_t)PQgetlength(*res, row, 1));
	}
out:
	free(index);
	comb_buf_release(&cids);
	comb_buf_release(&ids);
	comb_buf_release(&what);
	return rc;
}

static void deliver(struct litem *batch, size_t n)
{
	PGresult *res = NULL;
	struct litem *it;
	int rc;

	rc = load(batch, n, &res);
	if (rc) {
		interrupt_batch(batch, rc == COMB_ENOMEM ? "error: live delivery out of memory" :
				"error: live delivery unavailable");
	} else {
		for (it = batch; it; it = it->next) {
			if (it->type == COMB_SIGNAL_EPHEMERAL) {
				it->json = (const char *)it->payload;
				it->len = it->payload_len;
			}
			if (!it->json)
				continue;
			ws_live_deliver_event(it->community,
					      it->channel[0] ? it->channel : NULL,
					      it->json, it->len, (int)kind_of(it), it->at);
		}
	}
	PQclear(res);
}

static void *loader_main(void *arg)
{
	struct litem *batch, *last, *it, *next;
	size_t n;

	(void)arg;
	pthread_mutex_lock(&loader.mu);
	for (;;) {
		while (!loader.head && !loader.stop)
			pthread_cond_wait(&loader.cond, &loader.mu);
		if (loader.stop)
			break;
		batch = loader.head;
		last = batch;
		for (n = 1; n < BATCH && last->next; n++)
			last = last->next;
		loader.head = last->next;
		if (!loader.head)
			loader.tail = NULL;
		last->next = NULL;
		loader.backlog -= (long)n;
		pthread_mutex_unlock(&loader.mu);
		deliver(batch, n);
		for (it = batch; it; it = next) {
			next = it->next;
			free(it);
		}
		pthread_mutex_lock(&loader.mu);
	}
	pthread_mutex_unlock(&loader.mu);
	return NULL;
}

int feed_live_start(struct relay *relay, char *errbuf, size_t errlen)
{
	pthread_attr_t tattr;
	int err;

	loader.relay = relay;
	loader.stop = false;
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 512 * 1024);
	err = pthread_create(&loader.thread, &tattr, loader_main, NULL);
	pthread_attr_destroy(&tattr);
	if (err)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot start the live loader: %s", strerror(err));
	atomic_store(&loader.started, true);
	return 0;
}

void feed_live_stop(void)
{
	struct litem *it, *next;

	if (!atomic_load(&loader.started))
		return;
	atomic_store(&loader.started, false);
	pthread_mutex_lock(&loader.mu);
	loader.stop = true;
	pthread_cond_signal(&loader.cond);
	pthread_mutex_unlock(&loader.mu);
	pthread_join(loader.thread, NULL);
	for (it = loader.head; it; it = next) {
		next = it->next;
		free(it);
	}
	loader.head = loader.tail = NULL;
	loader.backlog = 0;
}
