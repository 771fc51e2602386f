/*
 * Live delivery (see feed.h): the queue of what plain live REQs on this
 * node may want, and the one thread that delivers it, in queue order.
 *
 * The feed thread queues event signals (feed_live_push), the write path
 * the events written through this node while capture is down (local.c);
 * neither waits. The thread takes up to BATCH items at a time and borrows
 * one connection for them, of a server that has replayed every item's
 * position (a standby of the node, else the primary; an item whose
 * position is unknown sends the batch to the primary). On it one
 * statement loads the JSON of the stored events among them (a stored
 * event by id; an artifact revision by id; the kind-45011 marker of a
 * move or of a redaction through artifact_moves or artifact_redactions);
 * events deleted or redacted by then are skipped, as a stored read would
 * skip them; ephemeral and local events come with their JSON. Then, item
 * by item, the hub finds the subscriptions that want the event
 * (hub_candidates, held until delivered, so a subscription removed
 * meanwhile is freed only once no delivery to it can be running), and one
 * query on the same connection checks their readers' access
 * (access_probe_all). A load or check a standby fails runs again on the
 * primary.
 */
#include "feed_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "hub/hub.h"
#include "revcache/revcache.h"

/* Items delivered with one connection at most. */
#define BATCH 256

struct item {
	struct item *next;
	int64_t community;
	char channel[37];          /* "" for none */
	unsigned type;             /* the signal's (COMB_SIGNAL_EVENT: local) */
	char id[65];               /* what to load; "" when the JSON came with it */
	comb_lsn at;               /* its position (COMB_READ_PRIMARY: unknown) */
	const char *json;          /* the event as served; NULL: skip */
	size_t len;
	size_t payload_len;
	char payload[];            /* the JSON that came with it */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct item *head, *tail;
	long backlog;
	bool lost;                 /* a local event was dropped */
	bool stop;
	atomic_bool running;
	pthread_t thread;
	struct relay *relay;

	/* the thread's own */
	struct comb_read_lease lease;  /* the batch's connection, or none */
	comb_lsn at;                   /* the batch's position */
	struct hub_sub **cands;
	size_t ncands, capcands;
} live = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* ------------------------------------------------------------------ */
/* the queue */

/* Appends it unless the backlog is full (it is freed then). Returns 0 or
 * COMB_ETOOBIG. */
static int enqueue(struct item *it)
{
	int rc = 0;

	pthread_mutex_lock(&live.mu);
	if (live.backlog >= FEED_LIVE_MAX_BACKLOG) {
		rc = COMB_ETOOBIG;
	} else {
		if (live.tail)
			live.tail->next = it;
		else
			live.head = it;
		live.tail = it;
		live.backlog++;
		pthread_cond_signal(&live.cond);
	}
	pthread_mutex_unlock(&live.mu);
	if (rc)
		free(it);
	return rc;
}

/* A new item of community in channel (NULL: none), with len bytes of
 * payload copied, or NULL when out of memory. */
static struct item *item_new(int64_t community, const char *channel,
			     const void *payload, size_t len)
{
	struct item *it = calloc(1, sizeof(*it) + len + 1);

	if (!it)
		return NULL;
	it->community = community;
	snprintf(it->channel, sizeof(it->channel), "%s", channel ? channel : "");
	it->payload_len = len;
	if (len)
		memcpy(it->payload, payload, len);
	return it;
}

void feed_live_push(const struct comb_signal *s)
{
	const char *channel = s->channel[0] ? s->channel : NULL;
	struct item *it;

	if (!atomic_load(&live.running))
		return;
	if (s->type != COMB_SIGNAL_EPHEMERAL && !s->id[0])
		return;  /* nothing to load */
	if (!hub_wanted(s->community, channel))
		return;
	it = item_new(s->community, channel, s->payload, s->payload_len);
	if (!it) {
		hub_interrupt_events(s->community, "error: live delivery out of memory");
		return;
	}
	it->type = s->type;
	it->at = s->lsn ? s->lsn : COMB_READ_PRIMARY;
	if (s->type != COMB_SIGNAL_EPHEMERAL)
		memcpy(it->id, s->id, sizeof(it->id));
	if (enqueue(it)) {
		comb_warn("feed: live delivery backlog full, community %" PRId64
			  " interrupted", s->community);
		hub_interrupt_events(s->community, FEED_INTERRUPTED);
	}
}

int feed_live_push_local(int64_t community_id, const char *channel,
			 const char *json, size_t len)
{
	struct item *it;

	if (!atomic_load(&live.running))
		return COMB_EIO;
	/* Nobody listens: a subscription that starts later reads the
	 * committed event from the database. */
	if (hub_event_subs() == 0)
		return 0;
	it = item_new(community_id, channel, json, len);
	if (!it)
		return COMB_ENOMEM;
	it->type = COMB_SIGNAL_EVENT;
	it->at = COMB_READ_PRIMARY;
	if (enqueue(it)) {
		/* the writing thread may hold locks: the live thread
		 * interrupts */
		pthread_mutex_lock(&live.mu);
		live.lost = true;
		pthread_cond_signal(&live.cond);
		pthread_mutex_unlock(&live.mu);
		comb_warn("live delivery backlog full: an event was dropped");
		return COMB_ETOOBIG;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* the batch's connection */

/* Gives the batch's connection back (broken when its last use lost it). */
static void give_back(bool broken)
{
	if (live.lease.conn)
		comb_read_release(live.relay->reads, &live.lease, broken);
}

/* True when a statement that failed on the batch's connection is to run
 * again on the primary (it ran on a standby): the connection is given
 * back and the batch moves to the primary. */
static bool to_primary(void)
{
	bool standby = live.lease.server >= 0;

	give_back(comb_db_conn_lost(live.lease.conn));
	live.at = COMB_READ_PRIMARY;
	return standby;
}

/* Borrows the batch's connection if it has none. Returns 0 or
 * COMB_EUNAVAIL. */
static int borrow(void)
{
	if (live.lease.conn)
		return 0;
	return comb_read_acquire(live.relay->reads, live.at, 2000, &live.lease)
		? COMB_EUNAVAIL : 0;
}

/* ------------------------------------------------------------------ */
/* loading */

/* The statement that loads stored events: $1 communities, $2 ids, $3 what
 * to look up (1 the event itself, 2 the marker of the move whose revision
 * is id, 3 the marker of the redaction of id). */
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

static int lookup_of(const struct item *it)
{
	switch (it->type) {
	case COMB_SIGNAL_MOVE: return 2;
	case COMB_SIGNAL_REDACTION: return 3;
	default: return 1;
	}
}

/*
 * Points every item of batch at its JSON: the stored ones at their row of
 * *res (loaded with one statement, which the caller clears), the others
 * at their payload. Returns 0, or a negative COMB_E* after which nothing
 * was loaded.
 */
static int load(struct item *batch, size_t n, PGresult **res)
{
	struct comb_buf cids, ids, what;
	struct item **index = calloc(n, sizeof(*index));
	struct item *it;
	size_t k = 0;
	int rc = index ? 0 : COMB_ENOMEM, row, attempt;

	comb_buf_init(&cids, n * 24 + 8);
	comb_buf_init(&ids, n * 66 + 8);
	comb_buf_init(&what, n * 3 + 8);
	rc = rc ? rc : comb_buf_putc(&cids, '{');
	rc = rc ? rc : comb_buf_putc(&ids, '{');
	rc = rc ? rc : comb_buf_putc(&what, '{');
	for (it = batch; it && rc == 0; it = it->next) {
		if (!it->id[0]) {
			it->json = it->payload;
			it->len = it->payload_len;
			continue;
		}
		rc = comb_buf_printf(&cids, "%s%" PRId64, k ? "," : "", it->community);
		rc = rc ? rc : comb_buf_printf(&ids, "%s%s", k ? "," : "", it->id);
		rc = rc ? rc : comb_buf_printf(&what, "%s%d", k ? "," : "", lookup_of(it));
		index[k++] = it;
	}
	rc = rc ? rc : comb_buf_putc(&cids, '}');
	rc = rc ? rc : comb_buf_putc(&ids, '}');
	rc = rc ? rc : comb_buf_putc(&what, '}');
	for (attempt = 0; rc == 0 && k > 0 && attempt < 2; attempt++) {
		rc = borrow();
		if (rc)
			break;
		*res = comb_db_exec_stmt(live.lease.pool, live.lease.conn, &load_stmt,
					 (const char *const[]){cids.data, ids.data, what.data});
		if (PQresultStatus(*res) == PGRES_TUPLES_OK)
			break;
		comb_warn("feed: loading live events failed: %s", PQresultErrorMessage(*res));
		PQclear(*res);
		*res = NULL;
		rc = to_primary() ? 0 : COMB_EUNAVAIL;
	}
	if (rc == 0 && k > 0 && !*res)
		rc = COMB_EUNAVAIL;  /* failed on the primary too */
	for (row = 0; rc == 0 && k > 0 && row < PQntuples(*res); row++) {
		long i = strtol(PQgetvalue(*res, row, 0), NULL, 10);

		if (i >= 1 && (size_t)i <= k) {
			index[i - 1]->json = PQgetvalue(*res, row, 1);
			index[i - 1]->len = (size_t)PQgetlength(*res, row, 1);
		}
		/* The new event's bytes, for the reads that follow. */
		revcache_put(live.relay->revisions,
			     strtoll(PQgetvalue(*res, row, 2), NULL, 10),
			     PQgetvalue(*res, row, 1),
			     (size_t)PQgetlength(*res, row, 1));
	}
	free(index);
	comb_buf_release(&cids);
	comb_buf_release(&ids);
	comb_buf_release(&what);
	return rc;
}

/* ------------------------------------------------------------------ */
/* delivering */

/* Tells every candidate of the event being delivered that events were
 * lost. */
static void interrupt_candidates(const char *reason)
{
	size_t i;

	for (i = 0; i < live.ncands; i++)
		live.cands[i]->kind->interrupt(live.cands[i], reason);
}

/* Runs the probes on the batch's connection; a check a standby fails runs
 * again on the primary. Returns 0 or a negative COMB_E*. */
static int check(struct access_probe *probes, size_t n)
{
	bool budget;
	int rc = 0, attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		rc = borrow();
		if (rc)
			return rc;
		rc = access_probe_all(live.lease.pool, live.lease.conn, probes, n, NULL, &budget);
		if (rc == 0 || rc == COMB_ENOMEM || !to_primary())
			return rc;
	}
	return rc;
}

/*
 * Delivers ev to the candidates whose reader may read its channel now:
 * one query loads the channel's facts and every candidate reader's active
 * role in it.
 */
static void deliver_in_channel(const struct hub_event *ev)
{
	struct access_probe *probes = calloc(live.ncands, sizeof(*probes));
	size_t i;
	int rc = probes ? 0 : COMB_ENOMEM;

	for (i = 0; i < live.ncands && rc == 0; i++)
		probes[i] = (struct access_probe){
			.community = ev->community,
			.channel = ev->channel,
			.reader = live.cands[i]->reader,
			.access = live.cands[i]->access,
			.named = live.cands[i]->named,
		};
	if (rc == 0)
		rc = check(probes, live.ncands);
	if (rc) {
		comb_warn("live delivery: the access check failed");
		interrupt_candidates(rc == COMB_ENOMEM ? "error: live delivery out of memory"
						       : "error: live delivery unavailable");
	}
	for (i = 0; i < live.ncands && rc == 0; i++)
		if (probes[i].readable)
			live.cands[i]->kind->deliver(live.cands[i], ev);
	free(probes);
}

/* Delivers the event of it (loaded) to the subscriptions that want it and
 * may read it. */
static void dispatch(const struct item *it)
{
	struct hub_event hev = {
		.community = it->community,
		.channel = it->channel[0] ? it->channel : NULL,
		.json = it->json,
		.json_len = it->len,
		.at = it->at == COMB_READ_PRIMARY ? 0 : it->at,
	};
	struct comb_event ev;
	char err[128];
	long found;
	size_t i;

	if (comb_event_parse(&ev, it->json, it->len, it->len, err, sizeof(err))) {
		comb_warn("live delivery: unparsable event dropped: %s", err);
		return;
	}
	hev.ev = &ev;
	found = hub_candidates(&hev, &live.cands, &live.capcands);
	if (found < 0) {
		comb_warn("live delivery: out of memory, an event was not delivered");
		hub_interrupt_events(it->community, "error: live delivery out of memory");
	}
	live.ncands = found > 0 ? (size_t)found : 0;
	if (live.ncands && hev.channel) {
		deliver_in_channel(&hev);
	} else {
		/* Events without a channel are readable by their author only. */
		for (i = 0; i < live.ncands; i++) {
			if (!strcmp(live.cands[i]->reader, ev.pubkey))
				live.cands[i]->kind->deliver(live.cands[i], &hev);
		}
	}
	hub_candidates_done(live.cands, live.ncands);
	comb_event_release(&ev);
}

/* Interrupts the live subscriptions of every community in the batch. */
static void interrupt_batch(struct item *batch, const char *reason)
{
	struct item *it;
	int64_t last = 0;

	for (it = batch; it; it = it->next) {
		if (it->community != last)
			hub_interrupt_events(it->community, reason);
		last = it->community;
	}
}

/* Loads and delivers the n items of batch in order, on one connection of
 * a server that has replayed all of them. */
static void deliver_batch(struct item *batch, size_t n)
{
	PGresult *res = NULL;
	struct item *it;
	int rc;

	live.at = 0;
	for (it = batch; it; it = it->next)
		if (it->at > live.at)
			live.at = it->at;
	rc = load(batch, n, &res);
	if (rc) {
		interrupt_batch(batch, rc == COMB_ENOMEM ? "error: live delivery out of memory" :
				"error: live delivery unavailable");
	} else {
		for (it = batch; it; it = it->next)
			if (it->json)
				dispatch(it);
	}
	PQclear(res);
	give_back(false);
}

static void *live_main(void *arg)
{
	struct item *batch, *last, *it, *next;
	bool lost;
	size_t n;

	(void)arg;
	pthread_mutex_lock(&live.mu);
	for (;;) {
		while (!live.head && !live.lost && !live.stop)
			pthread_cond_wait(&live.cond, &live.mu);
		if (live.stop)
			break;
		lost = live.lost;
		live.lost = false;
		batch = live.head;
		for (n = 1, last = batch; last && n < BATCH && last->next; n++)
			last = last->next;
		if (batch) {
			live.head = last->next;
			if (!live.head)
				live.tail = NULL;
			last->next = NULL;
			live.backlog -= (long)n;
		}
		pthread_mutex_unlock(&live.mu);
		if (lost)
			hub_interrupt_events(0, FEED_INTERRUPTED);
		if (batch)
			deliver_batch(batch, n);
		for (it = batch; it; it = next) {
			next = it->next;
			free(it);
		}
		pthread_mutex_lock(&live.mu);
	}
	pthread_mutex_unlock(&live.mu);
	return NULL;
}

int feed_live_start(struct relay *relay, char *errbuf, size_t errlen)
{
	pthread_attr_t tattr;
	int err;

	live.relay = relay;
	live.stop = false;
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 1024 * 1024);
	err = pthread_create(&live.thread, &tattr, live_main, NULL);
	pthread_attr_destroy(&tattr);
	if (err)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot start the live delivery thread: %s", strerror(err));
	atomic_store(&live.running, true);
	return 0;
}

void feed_live_stop(void)
{
	struct item *it, *next;

	if (!atomic_load(&live.running))
		return;
	atomic_store(&live.running, false);
	pthread_mutex_lock(&live.mu);
	live.stop = true;
	pthread_cond_signal(&live.cond);
	pthread_mutex_unlock(&live.mu);
	pthread_join(live.thread, NULL);
	for (it = live.head; it; it = next) {
		next = it->next;
		free(it);
	}
	live.head = live.tail = NULL;
	live.backlog = 0;
	free(live.cands);
	live.cands = NULL;
	live.ncands = live.capcands = 0;
}
