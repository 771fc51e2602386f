/*
 * Ephemeral events: relay nodes PUBLISH them on the Redis channel
 * "comb:ephemeral:<database>" (comb_signal_ephemeral_channel) as
 * "<community>:<channel>:<event json>"; a thread of ours
 * SUBSCRIBEs with a dedicated blocking hiredis context (reconnecting with
 * backoff when Redis goes away) and hands each message to the main loop
 * over an inproc ZeroMQ socket, where it is numbered and published like
 * any other signal.
 *
 * Redis pub/sub keeps nothing for a disconnected subscriber, so events
 * published while this thread reconnects are lost. They are ephemeral by
 * definition (typing, presence) and never part of a sync.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <hiredis/hiredis.h>
#include <zmq.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/clock.h"
#include "comb/log.h"
#include "comb/redis.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct ephemeral {
	void *zctx;              /* borrowed */
	struct comb_redis_url url; /* its database names the channel */
	char channel[COMB_SIGNAL_EPHEMERAL_CHANNEL_MAX];
	struct capture_stats *stats; /* borrowed: connected, lost */
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t lock;    /* guards ctx and wakes the backoff sleep */
	pthread_cond_t wake;
	redisContext *ctx;       /* the live subscription, if any */
	atomic_ulong dropped;    /* messages the inproc queue refused */
};

/* Sleeps ms unless asked to stop. */
static void backoff_sleep(struct ephemeral *e, int ms)
{
	struct timespec until;

	comb_deadline_in(&until, CLOCK_REALTIME, ms);
	pthread_mutex_lock(&e->lock);
	while (!atomic_load(&e->stop) &&
	       pthread_cond_timedwait(&e->wake, &e->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&e->lock);
}

static bool is_message(const redisReply *r)
{
	return r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	       r->element[0]->type == REDIS_REPLY_STRING &&
	       strcmp(r->element[0]->str, "message") == 0 &&
	       r->element[2]->type == REDIS_REPLY_STRING;
}

/* Connects and subscribes; returns the context or NULL (reason logged
 * once per outage through *logged). */
static redisContext *subscribe(struct ephemeral *e, bool *logged)
{
	struct timeval none = {0, 0};
	char why[160] = "";
	redisContext *c = comb_redis_connect(&e->url, 2000, why, sizeof(why));
	redisReply *r;

	if (!c) {
		if (!*logged)
			comb_warn("ephemeral: cannot connect to redis %s:%d: %s",
				  e->url.host, e->url.port, why);
		*logged = true;
		return NULL;
	}
	redisEnableKeepAlive(c);
	r = redisCommand(c, "SUBSCRIBE %s", e->channel);
	if (!r || r->type != REDIS_REPLY_ARRAY) {
		if (!*logged)
			comb_warn("ephemeral: redis refused SUBSCRIBE: %s",
				  r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
		*logged = true;
		if (r)
			freeReplyObject(r);
		redisFree(c);
		return NULL;
	}
	freeReplyObject(r);
	/* From now on block for as long as Redis is quiet. */
	if (redisSetTimeout(c, none) != REDIS_OK) {
		redisFree(c);
		return NULL;
	}
	comb_info("ephemeral: subscribed to redis %s:%d channel %s", e->url.host,
		  e->url.port, e->channel);
	*logged = false;
	return c;
}

static void *redis_main(void *arg)
{
	struct ephemeral *e = arg;
	void *push = zmq_socket(e->zctx, ZMQ_PUSH);
	int backoff = BACKOFF_MIN_MS, hwm = 10000, zero = 0;
	bool logged = false;

	if (!push || zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_connect(push, CAPTURE_EPHEMERAL_ENDPOINT)) {
		comb_error("ephemeral: inproc socket: %s", zmq_strerror(zmq_errno()));
		if (push)
			zmq_close(push);
		return NULL;
	}
	while (!atomic_load(&e->stop)) {
		redisContext *c = subscribe(e, &logged);
		redisReply *r;

		if (!c) {
			backoff_sleep(e, backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		backoff = BACKOFF_MIN_MS;
		pthread_mutex_lock(&e->lock);
		e->ctx = c;
		pthread_mutex_unlock(&e->lock);
		atomic_store(&e->stats->redis_connected, true);

		while (!atomic_load(&e->stop) &&
		       redisGetReply(c, (void **)&r) == REDIS_OK && r) {
			if (is_message(r)) {
				const redisReply *m = r->element[2];

				if (zmq_send(push, m->str, m->len, ZMQ_DONTWAIT) < 0 &&
				    atomic_fetch_add(&e->dropped, 1) % 1000 == 0)
					comb_warn("ephemeral: main loop behind, "
						  "ephemeral events dropped");
			}
			freeReplyObject(r);
		}

		pthread_mutex_lock(&e->lock);
		e->ctx = NULL;
		pthread_mutex_unlock(&e->lock);
		atomic_store(&e->stats->redis_connected, false);
		if (!atomic_load(&e->stop))
			atomic_fetch_add(&e->stats->redis_lost, 1);
		if (!atomic_load(&e->stop))
			comb_warn("ephemeral: redis subscription lost: %s; reconnecting",
				  c->errstr[0] ? c->errstr : "connection closed");
		redisFree(c);
	}
	zmq_close(push);
	return NULL;
}

int ephemeral_start(struct capture *cap, char *errbuf, size_t errlen)
{
	struct ephemeral *e = calloc(1, sizeof(*e));
	sigset_t block, old;
	int rc;

	if (!e)
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	cap->eph = e;
	e->zctx = cap->zctx;
	e->stats = &cap->stats;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->wake, NULL);
	rc = comb_redis_url_parse(cap->cfg.redis_url, &e->url, errbuf, errlen);
	if (rc)
		return rc;
	comb_signal_ephemeral_channel(e->url.db, e->channel);

	cap->pull = zmq_socket(cap->zctx, ZMQ_PULL);
	if (!cap->pull || zmq_bind(cap->pull, CAPTURE_EPHEMERAL_ENDPOINT))
		return comb_fail(errbuf, errlen, COMB_EIO, "inproc socket: %s",
				 zmq_strerror(zmq_errno()));

	/* SIGINT and SIGTERM belong to the main loop. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(&e->thread, NULL, redis_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot start the redis thread: %s", strerror(rc));
	e->started = true;
	return 0;
}

void ephemeral_stop(struct capture *cap)
{
	struct ephemeral *e = cap->eph;

	if (!e)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->lock);
		atomic_store(&e->stop, true);
		/* Wakes a blocked read; the thread frees the context. */
		if (e->ctx)
			shutdown(e->ctx->fd, SHUT_RDWR);
		pthread_cond_broadcast(&e->wake);
		pthread_mutex_unlock(&e->lock);
		pthread_join(e->thread, NULL);
	}
	if (cap->pull)
		zmq_close(cap->pull);
	cap->pull = NULL;
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->wake);
	memset(&e->url, 0, sizeof(e->url));
	free(e);
	cap->eph = NULL;
}

void ephemeral_drain(struct capture *cap)
{
	for (;;) {
		struct comb_signal s;
		char err[128];
		zmq_msg_t msg;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, cap->pull, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			return;
		}
		if (!capture_publishing(cap)) {
			zmq_msg_close(&msg);
			continue;
		}
		if (comb_signal_parse_ephemeral(zmq_msg_data(&msg),
						zmq_msg_size(&msg), &s, err,
						sizeof(err))) {
			atomic_fetch_add(&cap->stats.rejected, 1);
			comb_warn("ephemeral: message refused: %s", err);
		} else {
			publish_signal(cap, &s);
		}
		zmq_msg_close(&msg);
	}
}
