/*
 * The live dispatcher (see feed.h): the queue of events to deliver, and
 * the thread that hands each to the subscriptions the hub finds for it
 * (hub_candidates: matching, under the hub's lock) whose reader may read
 * it now (one access query for all of them). The hub holds the
 * candidates while they are delivered to, so a subscription removed
 * meanwhile is freed only once no delivery to it can be running.
 */
#include "feed_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/error.h"
#include "comb/log.h"
#include "hub/hub.h"

#define MAX_JSON (16 * 1024 * 1024)

struct item {
	struct item *next;
	int64_t community_id;
	bool has_channel;
	char channel[37];
	int kind;
	comb_lsn at;                  /* the access check sees this position */
	size_t len;
	char json[];
};

static struct {
	pthread_mutex_t qmu;
	pthread_cond_t qcond;
	struct item *head, *tail;
	long backlog;
	bool lost;
	bool stop;
	atomic_bool running;
	pthread_t thread;
	struct relay *relay;

	struct hub_sub **cands;       /* dispatcher thread only */
	size_t ncands, capcands;
} live = {
	.qmu = PTHREAD_MUTEX_INITIALIZER,
	.qcond = PTHREAD_COND_INITIALIZER,
};

static atomic_bool local_feed = true;

/* ------------------------------------------------------------------ */
/* the dispatcher */

/* Events the dispatcher delivers with one connection at most. */
#define DISPATCH_BATCH 64

/* The connection the events of one batch are checked on, borrowed at
 * its first check from a server that has replayed every event's
 * position. */
struct checker {
	comb_lsn at;
	struct comb_read_lease lease;
};

/* Tells every candidate of the event being delivered that events were
 * lost. */
static void interrupt_candidates(const char *reason)
{
	size_t i;

	for (i = 0; i < live.ncands; i++)
		live.cands[i]->kind->interrupt(live.cands[i], reason);
}

/* Runs the probes on ck's server, borrowing its connection at the first
 * call; a check a standby fails runs again on the primary. Returns 0 or
 * a negative COMB_E*. */
static int check(struct checker *ck, struct access_probe *probes, size_t n)
{
	bool budget;
	int rc, attempt;

	for (attempt = 0; attempt < 2; attempt++) {
		if (!ck->lease.conn &&
		    comb_read_acquire(live.relay->reads, ck->at, 2000, &ck->lease))
			return COMB_EUNAVAIL;
		rc = access_probe_all(ck->lease.pool, ck->lease.conn, probes, n, NULL, &budget);
		if (rc == 0 || rc == COMB_ENOMEM || ck->lease.server < 0)
			return rc;
		comb_read_release(live.relay->reads, &ck->lease,
				  comb_db_conn_lost(ck->lease.conn));
		ck->at = COMB_READ_PRIMARY;
	}
	return rc;
}

/*
 * Delivers ev to the candidates whose reader may read its channel now:
 * one query loads the channel's facts and every candidate reader's active
 * role in it (access_probe_all), on a server that has replayed ev.
 */
static void deliver_in_channel(const struct hub_event *ev, struct checker *ck)
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
		rc = check(ck, probes, live.ncands);
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

static void dispatch(const struct item *it, struct checker *ck)
{
	struct hub_event hev = {
		.community = it->community_id,
		.channel = it->has_channel ? it->channel : NULL,
		.json = it->json,
		.json_len = it->len,
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
		hub_interrupt_events(it->community_id, "error: live delivery out of memory");
	}
	live.ncands = found > 0 ? (size_t)found : 0;
	if (live.ncands && it->has_channel) {
		deliver_in_channel(&hev, ck);
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

/* Delivers the events of batch in order, checking access on one
 * connection of a server that has replayed all of them. */
static void dispatch_batch(struct item *batch)
{
	struct checker ck = {.at = 0};
	struct item *it, *next;

	for (it = batch; it; it = it->next)
		if (it->at > ck.at)
			ck.at = it->at;
	for (it = batch; it; it = next) {
		next = it->next;
		dispatch(it, &ck);
		free(it);
	}
	if (ck.lease.conn)
		comb_read_release(live.relay->reads, &ck.lease, comb_db_conn_lost(ck.lease.conn));
}

static void *dispatcher_main(void *arg)
{
	struct item *batch, *last;
	bool lost;
	int n;

	(void)arg;
	pthread_mutex_lock(&live.qmu);
	for (;;) {
		while (!live.head && !live.lost && !live.stop)
			pthread_cond_wait(&live.qcond, &live.qmu);
		if (live.stop)
			break;
		lost = live.lost;
		live.lost = false;
		batch = lost ? NULL : live.head;
		if (batch) {
			for (n = 1, last = batch; n < DISPATCH_BATCH && last->next; n++)
				last = last->next;
			live.head = last->next;
			if (!live.head)
				live.tail = NULL;
			last->next = NULL;
			live.backlog -= n;
		}
		pthread_mutex_unlock(&live.qmu);
		if (lost)
			hub_interrupt_events(0, FEED_INTERRUPTED);
		if (batch)
			dispatch_batch(batch);
		pthread_mutex_lock(&live.qmu);
	}
	pthread_mutex_unlock(&live.qmu);
	return NULL;
}

int ws_live_start(struct relay *relay, char *errbuf, size_t errlen)
{
	pthread_attr_t tattr;
	int err;

	live.relay = relay;
	live.stop = false;
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 1024 * 1024);
	err = pthread_create(&live.thread, &tattr, dispatcher_main, NULL);
	pthread_attr_destroy(&tattr);
	if (err)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot start the live dispatcher: %s", strerror(err));
	atomic_store(&live.running, true);
	return 0;
}

void ws_live_stop(void)
{
	struct item *it, *next;

	if (!atomic_load(&live.running))
		return;
	pthread_mutex_lock(&live.qmu);
	live.stop = true;
	pthread_cond_signal(&live.qcond);
	pthread_mutex_unlock(&live.qmu);
	pthread_join(live.thread, NULL);
	atomic_store(&live.running, false);
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

int ws_live_deliver_event(int64_t community_id, const char *channel,
			  const char *json, size_t len, int kind, comb_lsn at)
{
	struct item *it;

	if (!atomic_load(&live.running))
		return COMB_EIO;
	/* Nobody listens: a subscription that starts later reads the
	 * committed event from the database. */
	if (hub_event_subs() == 0)
		return 0;
	it = malloc(sizeof(*it) + len + 1);
	if (!it)
		return COMB_ENOMEM;
	it->next = NULL;
	it->community_id = community_id;
	it->has_channel = channel != NULL;
	snprintf(it->channel, sizeof(it->channel), "%s", channel ? channel : "");
	it->kind = kind;
	it->at = at;
	it->len = len;
	memcpy(it->json, json, len);
	it->json[len] = '\0';
	pthread_mutex_lock(&live.qmu);
	if (live.backlog >= WS_LIVE_MAX_BACKLOG) {
		live.lost = true;
		pthread_cond_signal(&live.qcond);
		pthread_mutex_unlock(&live.qmu);
		free(it);
		comb_warn("live delivery backlog full: an event was dropped");
		return COMB_ETOOBIG;
	}
	if (live.tail)
		live.tail->next = it;
	else
		live.head = it;
	live.tail = it;
	live.backlog++;
	pthread_cond_signal(&live.qcond);
	pthread_mutex_unlock(&live.qmu);
	return 0;
}

/* ------------------------------------------------------------------ */
/* the local feed */

struct pending {
	struct pending *next;
	int64_t community_id;
	bool has_channel;
	char channel[37];
	int kind;
	char *json;
	size_t len;
};

static _Thread_local struct pending *pending_head, *pending_tail;

void ws_live_set_local_feed(bool on)
{
	atomic_store(&local_feed, on);
}

static bool local_feed_on(void)
{
	return atomic_load(&live.running) && atomic_load(&local_feed);
}

static void pending_clear(void)
{
	struct pending *p = pending_head, *next;

	for (; p; p = next) {
		next = p->next;
		free(p->json);
		free(p);
	}
	pending_head = pending_tail = NULL;
}

void ws_live_local_begin(void)
{
	pending_clear();
}

/* Records ev for delivery when the write commits. */
static void pending_add(int64_t community_id, const struct comb_event *ev,
			const char *channel)
{
	struct pending *p = calloc(1, sizeof(*p));
	struct comb_buf json;

	comb_buf_init(&json, MAX_JSON);
	if (!p || comb_event_to_json(ev, &json) ||
	    !(p->json = comb_buf_detach(&json, &p->len))) {
		comb_warn("live delivery: out of memory, an event will not be delivered");
		comb_buf_release(&json);
		free(p);
		return;
	}
	p->community_id = community_id;
	p->has_channel = channel != NULL;
	snprintf(p->channel, sizeof(p->channel), "%s", channel ? channel : "");
	p->kind = ev->kind;
	if (pending_tail)
		pending_tail->next = p;
	else
		pending_head = p;
	pending_tail = p;
}

void ws_live_local_stored(const struct community *c,
			  const struct comb_event *ev, const char *channel)
{
	if (local_feed_on())
		pending_add(c->id, ev, channel);
}

struct ws_live_local *ws_live_local_take(const struct community *c,
					 const struct comb_event *ev,
					 bool accepted)
{
	struct pending *p = NULL;

	if (accepted && local_feed_on() && ev->kind >= 20000 && ev->kind < 30000)
		pending_add(c->id, ev, comb_event_tag_value(ev, "h"));
	if (accepted && local_feed_on()) {
		p = pending_head;
		pending_head = pending_tail = NULL;
	}
	pending_clear();
	return (struct ws_live_local *)p;
}

void ws_live_local_deliver(struct ws_live_local *taken, bool committed)
{
	struct pending *p = (struct pending *)taken, *next;

	for (; p; p = next) {
		next = p->next;
		if (committed)
			ws_live_deliver_event(p->community_id,
					      p->has_channel ? p->channel : NULL,
					      p->json, p->len, p->kind, COMB_READ_PRIMARY);
		free(p->json);
		free(p);
	}
}

void ws_live_local_end(const struct community *c, const struct comb_event *ev,
		       bool accepted)
{
	ws_live_local_deliver(ws_live_local_take(c, ev, accepted), true);
}
