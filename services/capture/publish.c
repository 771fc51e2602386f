/*
 * The publishing side of comb-capture: one ZeroMQ XPUB socket bound to
 * this instance's endpoint, the epoch and per-community sequence numbers,
 * heartbeats and marks (see comb/signal.h for what they promise).
 *
 * XPUB rather than PUB so that capture sees each subscription: a relay
 * that subscribes to "<community>:" gets a mark for that community at
 * once, which tells it the community's current seq and that its
 * subscription is in effect. Every instance binds its own endpoint and
 * relays connect to all of them; only the leader sends.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <zmq.h>

#include "capture.h"
#include "comb/error.h"
#include "comb/list.h"
#include "comb/log.h"

/* Per-subscriber queue before ZeroMQ drops (the seq shows the drop). */
#define PUB_SNDHWM 100000

int publish_open(struct capture *cap, char *errbuf, size_t errlen)
{
	const char *list = cap->cfg.capture_endpoint;
	int hwm = PUB_SNDHWM, one = 1, zero = 0;
	char endpoint[256];
	const char *p = list;
	int rc;

	cap->pub = zmq_socket(cap->zctx, ZMQ_XPUB);
	if (!cap->pub)
		return comb_fail(errbuf, errlen, COMB_EIO, "zmq socket: %s",
				 zmq_strerror(zmq_errno()));
	zmq_setsockopt(cap->pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(cap->pub, ZMQ_XPUB_VERBOSE, &one, sizeof(one));
	zmq_setsockopt(cap->pub, ZMQ_LINGER, &zero, sizeof(zero));

	while ((rc = comb_list_next(&p, endpoint, sizeof(endpoint))) > 0) {
		if (zmq_bind(cap->pub, endpoint) == 0) {
			snprintf(cap->endpoint, sizeof(cap->endpoint), "%s", endpoint);
			return 0;
		}
		comb_info("publish: cannot bind %s: %s", endpoint,
			  zmq_strerror(zmq_errno()));
	}
	if (rc < 0)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "COMB_CAPTURE_ENDPOINT: an endpoint is too long");
	return comb_fail(errbuf, errlen, COMB_EIO,
			 "no endpoint of COMB_CAPTURE_ENDPOINT (%s) can be bound",
			 list);
}

void publish_close(struct capture *cap)
{
	if (cap->pub)
		zmq_close(cap->pub);
	cap->pub = NULL;
}

/* Milliseconds of the wall clock (what a scraper compares with). */
static int64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The counter of s in capture_stats.signals (a mark has its own). */
static unsigned int stat_index(const struct comb_signal *s)
{
	if (s->type == COMB_SIGNAL_HEARTBEAT && s->community != 0)
		return CAPTURE_STAT_MARK;
	if (s->type > COMB_SIGNAL_LAST_KNOWN)
		COMB_BUG("publish: signal type %u has no counter", s->type);
	return s->type;
}

/* Encodes and sends s, already numbered, as [topic, msgpack]. */
static int send_signal(struct capture *cap, const struct comb_signal *s)
{
	char topic[COMB_SIGNAL_TOPIC_MAX], err[160];
	size_t tlen;
	int rc;

	comb_buf_reset(&cap->out);
	rc = comb_signal_encode(s, &cap->out, err, sizeof(err));
	if (rc == 0)
		rc = comb_signal_topic(s, topic, sizeof(topic), &tlen);
	if (rc) {
		comb_error("publish: cannot encode a %s signal of community %" PRId64
			   ": %s", comb_signal_type_name(s->type), s->community,
			   rc == COMB_EINVAL && !err[0] ? "bad topic" : err);
		return rc;
	}
	if (zmq_send(cap->pub, topic, tlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(cap->pub, cap->out.data, cap->out.len, ZMQ_DONTWAIT) < 0) {
		comb_error("publish: send failed: %s", zmq_strerror(zmq_errno()));
		return COMB_EIO;
	}
	atomic_fetch_add(&cap->stats.signals[stat_index(s)], 1);
	if (s->type == COMB_SIGNAL_HEARTBEAT && s->community == 0)
		atomic_store(&cap->stats.heartbeat_unix_ms, unix_ms());
	return 0;
}

static void send_mark(struct capture *cap, const struct community *c)
{
	struct comb_signal s;

	memset(&s, 0, sizeof(s));
	s.epoch = cap->epoch;
	s.type = COMB_SIGNAL_HEARTBEAT;
	s.community = c->id;
	s.seq = c->seq;
	send_signal(cap, &s);
}

static uint64_t random_epoch(void)
{
	uint64_t e = 0;

	while (e == 0) {
		if (getrandom(&e, sizeof(e), 0) != (ssize_t)sizeof(e))
			e = ((uint64_t)comb_monotonic_ms() << 20) ^ (uint64_t)rand();
	}
	return e;
}

void publish_new_epoch(struct capture *cap)
{
	size_t i;

	cap->epoch = random_epoch();
	cap->tick = 0;
	atomic_store(&cap->stats.epoch, cap->epoch);
	atomic_fetch_add(&cap->stats.epochs, 1);
	communities_reset(&cap->communities);
	comb_info("publish: epoch %016" PRIx64 " begins on %s", cap->epoch,
		  cap->endpoint);
	for (i = 0; i < cap->communities.cap; i++) {
		const struct community *c = &cap->communities.slots[i];

		if (c->id != 0 && c->subscribed)
			send_mark(cap, c);
	}
}

int publish_signal(struct capture *cap, struct comb_signal *s)
{
	struct community *c = communities_get(&cap->communities, s->community,
					      true);

	if (!c) {
		comb_error("publish: no sequence for community %" PRId64
			   ", %s signal dropped", s->community,
			   comb_signal_type_name(s->type));
		return COMB_ENOMEM;
	}
	s->epoch = cap->epoch;
	s->seq = c->seq + 1;
	c->seq = s->seq;
	c->last_tick = cap->tick;
	/*
	 * Once numbered, the seq is spent even if the send fails: a relay
	 * then sees a gap, which is what happened.
	 */
	return send_signal(cap, s);
}

void publish_heartbeat(struct capture *cap)
{
	struct comb_signal s;
	size_t i;

	memset(&s, 0, sizeof(s));
	s.epoch = cap->epoch;
	s.type = COMB_SIGNAL_HEARTBEAT;
	send_signal(cap, &s);
	for (i = 0; i < cap->communities.cap; i++) {
		const struct community *c = &cap->communities.slots[i];

		if (c->id != 0 && c->seq != 0 &&
		    cap->tick - c->last_tick < CAPTURE_MARK_TICKS)
			send_mark(cap, c);
	}
	cap->tick++;
}

/* The community a subscription prefix names ("<id>:..." or "<id>"), or 0. */
static int64_t prefix_community(const unsigned char *p, size_t n)
{
	int64_t v = 0;
	size_t i;

	for (i = 0; i < n && p[i] != ':'; i++) {
		if (p[i] < '0' || p[i] > '9' || i >= 18)
			return 0;
		v = v * 10 + (p[i] - '0');
	}
	if (i == 0 || (i > 1 && p[0] == '0'))
		return 0;
	return v;
}

void publish_subscriptions(struct capture *cap)
{
	unsigned char buf[COMB_SIGNAL_TOPIC_MAX + 1];
	int n;

	for (;;) {
		struct community *c;
		int64_t id;
		size_t i;

		n = zmq_recv(cap->pub, buf, sizeof(buf), ZMQ_DONTWAIT);
		if (n < 0)
			return; /* EAGAIN: nothing more, or interrupted */
		if (n < 1 || buf[0] != 1)
			continue; /* unsubscription, or not a subscription */
		if ((size_t)n > sizeof(buf))
			n = sizeof(buf); /* truncated: the prefix is enough */
		if (n == 1 && capture_publishing(cap)) {
			/* everything: marks for every community known */
			for (i = 0; i < cap->communities.cap; i++)
				if (cap->communities.slots[i].id != 0)
					send_mark(cap, &cap->communities.slots[i]);
			continue;
		}
		id = prefix_community(buf + 1, (size_t)n - 1);
		c = id > 0 ? communities_get(&cap->communities, id, true) : NULL;
		if (!c)
			continue;
		c->subscribed = true;
		if (capture_publishing(cap))
			send_mark(cap, c);
	}
}
