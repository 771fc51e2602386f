/*
 * The capture feed's subscriber thread (see feed.h and docs/operations.md,
 * "What relay nodes do with gaps").
 *
 * Each capture endpoint has a SUB socket of its own, served by a ZeroMQ
 * I/O thread of its own: ZeroMQ resolves an endpoint's host name in the
 * I/O thread that reconnects it, and a name that stopped resolving (the
 * container of a capture that died) would otherwise hold up the messages
 * of the capture that took over.
 *
 * The thread owns the SUB sockets (ZeroMQ sockets are not thread-safe), so
 * other threads ask for a community's subscription through a list under
 * `mu` and an eventfd that wakes the thread's poll. Trust, last sequence
 * numbers and interruption generations live under `mu` too, so that a
 * sync can wait for its community to become trusted.
 *
 * A community becomes trusted on the first mark (or the signal with seq 1)
 * of the current epoch. Messages of an epoch followed before and left
 * (a late message of a former leader) are dropped: leaving that epoch
 * interrupted everything already. While trusted, a signal whose seq is not the last
 * plus one, or a mark ahead of the last seq, interrupts the community: its
 * generation goes up and its syncs and live subscriptions are closed; the
 * count then goes on from the new seq, since every change whose signal was
 * lost committed before that signal was published and is therefore in the
 * snapshot of any sync opened afterwards. A new epoch or three missed
 * heartbeats interrupt every community and leave each untrusted until its
 * next mark; the three intervals start over with a new epoch's first
 * message, so a failover is one interruption, not two. Capture answers
 * every (repeated) subscription with a mark, so the thread subscribes
 * again, once per heartbeat interval, to each community still untrusted
 * while capture is alive.
 */
#include "feed.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "comb/clock.h"
#include "comb/error.h"
#include "comb/list.h"
#include "comb/log.h"
#include "feed_int.h"
#include "metrics/metrics.h"

#define BUCKETS 1024
/* Communities one node follows at most (each has WebSocket sessions). */
#define MAX_COMMUNITIES 65536
/* Messages ZeroMQ queues for us before it drops (the seq shows the drop). */
#define FEED_RCVHWM 100000
/* Messages handled per poll round before timers are looked at again. */
#define ROUND_MESSAGES 4096
/* Capture endpoints one node follows at most (one I/O thread each). */
#define MAX_ENDPOINTS 8
/* Epochs left behind that are remembered, so that a late message of an old
 * leader (another connection, another order) does not count as one more
 * change of epoch. */
#define PAST_EPOCHS 8

struct fcomm {
	struct fcomm *next;        /* bucket chain */
	struct fcomm *next_fresh;  /* waiting for the thread to subscribe */
	int64_t id;
	bool subscribed;           /* the thread subscribed at least once */
	bool trusted;
	uint64_t last_seq;         /* last seq seen in this epoch */
	uint64_t generation;       /* interruptions so far */
	int64_t asked_ms;          /* last (re)subscription */
};

static struct {
	/* set before the thread starts, read-only after */
	const struct feed_listener *listener;   /* NULL: none */

	pthread_mutex_t mu;        /* the table, trust, alive */
	pthread_cond_t trust;      /* a community became trusted, or alive */
	struct fcomm *buckets[BUCKETS];
	struct fcomm *fresh;
	size_t count;
	bool full_warned;
	bool alive;                /* heartbeats arrive */

	atomic_bool stop;
	atomic_bool started;
	pthread_t thread;
	int wake;                  /* eventfd */
	void *zctx;
	void *subs[MAX_ENDPOINTS]; /* one SUB socket per capture endpoint */
	int nsubs;
	int interval_ms;
	atomic_llong last_beat_ms; /* 0: none yet */

	/* the thread's own */
	uint64_t epoch;            /* 0 before the first message */
	uint64_t left[PAST_EPOCHS]; /* epochs followed before, newest first */
	uint64_t received, refused, stale;
	/* Since the last heartbeat: time the thread could not listen (its
	 * poll came back late: the process was stopped or starved), which
	 * is not capture's silence. */
	int64_t deaf_ms;
} feed = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.wake = -1,
};

static unsigned bucket_of(int64_t id)
{
	return (unsigned)(((uint64_t)id * 11400714819323198485ULL) >> 54) % BUCKETS;
}

/* Finds community id; the caller holds mu. */
static struct fcomm *find_locked(int64_t id)
{
	struct fcomm *c;

	for (c = feed.buckets[bucket_of(id)]; c; c = c->next) {
		if (c->id == id)
			return c;
	}
	return NULL;
}

/* Finds or adds community id, queueing its subscription; the caller holds
 * mu. Returns NULL when the table is full or out of memory. */
static struct fcomm *watch_locked(int64_t id, bool *added)
{
	struct fcomm *c = find_locked(id);
	unsigned b;

	*added = false;
	if (c)
		return c;
	if (feed.count >= MAX_COMMUNITIES || !(c = calloc(1, sizeof(*c)))) {
		if (!feed.full_warned)
			comb_warn("feed: cannot follow community %" PRId64
				  " (table full or out of memory)", id);
		feed.full_warned = true;
		return NULL;
	}
	c->id = id;
	b = bucket_of(id);
	c->next = feed.buckets[b];
	feed.buckets[b] = c;
	c->next_fresh = feed.fresh;
	feed.fresh = c;
	feed.count++;
	*added = true;
	return c;
}

static void wake_thread(void)
{
	uint64_t one = 1;

	if (feed.wake >= 0 && write(feed.wake, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		comb_warn("feed: cannot wake the subscriber: %s", strerror(errno));
}

void feed_watch(int64_t community_id)
{
	bool added = false;

	if (community_id <= 0 || !atomic_load(&feed.started))
		return;
	pthread_mutex_lock(&feed.mu);
	watch_locked(community_id, &added);
	pthread_mutex_unlock(&feed.mu);
	if (added)
		wake_thread();
}

bool feed_alive(void)
{
	long long last = atomic_load(&feed.last_beat_ms);

	return atomic_load(&feed.started) && last != 0 &&
	       comb_monotonic_ms() - last <= (int64_t)FEED_MISSED_HEARTBEATS * feed.interval_ms;
}

int feed_wait_trusted(int64_t community_id, int timeout_ms,
		      uint64_t *generation)
{
	struct timespec deadline;
	struct fcomm *c;
	bool added = false;
	int rc = COMB_EUNAVAIL;

	if (!atomic_load(&feed.started))
		return COMB_EUNAVAIL;
	comb_deadline_in(&deadline, CLOCK_MONOTONIC, timeout_ms);
	pthread_mutex_lock(&feed.mu);
	c = watch_locked(community_id, &added);
	if (added)
		wake_thread();
	while (c) {
		if (c->trusted && feed.alive) {
			*generation = c->generation;
			rc = 0;
			break;
		}
		if (pthread_cond_timedwait(&feed.trust, &feed.mu, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&feed.mu);
	return rc;
}

int feed_trust_wait_ms(const struct comb_config *cfg)
{
	return (FEED_MISSED_HEARTBEATS + 1) * cfg->capture_heartbeat_ms + 500;
}

bool feed_still_trusted(int64_t community_id, uint64_t generation)
{
	struct fcomm *c;
	bool ok;

	pthread_mutex_lock(&feed.mu);
	c = find_locked(community_id);
	ok = c && c->trusted && feed.alive && c->generation == generation;
	pthread_mutex_unlock(&feed.mu);
	return ok;
}

/* ------------------------------------------------------------------ */
/* the subscriber thread */

/* Subscribes every endpoint's socket to topics starting with prefix. */
static void subscribe(const char *prefix, size_t len)
{
	int i;

	for (i = 0; i < feed.nsubs; i++) {
		if (zmq_setsockopt(feed.subs[i], ZMQ_SUBSCRIBE, prefix, len))
			comb_warn("feed: cannot subscribe: %s", zmq_strerror(zmq_errno()));
	}
}

static void subscribe_community(struct fcomm *c, int64_t now)
{
	char prefix[32];
	int n = snprintf(prefix, sizeof(prefix), "%" PRId64 ":", c->id);

	subscribe(prefix, (size_t)n);
	c->subscribed = true;
	c->asked_ms = now;
}

/* Subscribes to the communities asked for since the last round. */
static void take_fresh(int64_t now)
{
	struct fcomm *c, *next;

	pthread_mutex_lock(&feed.mu);
	for (c = feed.fresh; c; c = next) {
		next = c->next_fresh;
		c->next_fresh = NULL;
		subscribe_community(c, now);
	}
	feed.fresh = NULL;
	pthread_mutex_unlock(&feed.mu);
}

/* Asks capture for a mark of every community still untrusted, at most
 * once per heartbeat interval each, while capture is alive. */
static void ask_marks(int64_t now)
{
	struct fcomm *c;
	size_t b;

	pthread_mutex_lock(&feed.mu);
	if (feed.alive) {
		for (b = 0; b < BUCKETS; b++) {
			for (c = feed.buckets[b]; c; c = c->next) {
				if (c->subscribed && !c->trusted &&
				    now - c->asked_ms >= feed.interval_ms)
					subscribe_community(c, now);
			}
		}
	}
	pthread_mutex_unlock(&feed.mu);
}

/* Closes what follows community id (0: every community). */
static void interrupt_subscribers(int64_t id)
{
	if (feed.listener)
		feed.listener->interrupt(id, FEED_INTERRUPTED);
}

/* Hands s to the listener. */
static void notify_listener(const struct comb_signal *s)
{
	if (feed.listener)
		feed.listener->signal(s);
}

/* Every community: untrusted, interrupted. */
static void interrupt_all(const char *why)
{
	struct fcomm *c;
	size_t b;

	comb_warn("feed: %s: interrupting every sync", why);
	pthread_mutex_lock(&feed.mu);
	for (b = 0; b < BUCKETS; b++) {
		for (c = feed.buckets[b]; c; c = c->next) {
			c->trusted = false;
			c->last_seq = 0;
			c->generation++;
		}
	}
	pthread_mutex_unlock(&feed.mu);
	interrupt_subscribers(0);
}

static void on_beat(int64_t now)
{
	bool was;

	atomic_store(&feed.last_beat_ms, (long long)now);
	feed.deaf_ms = 0;
	metrics_feed_beat();
	pthread_mutex_lock(&feed.mu);
	was = feed.alive;
	feed.alive = true;
	if (!was)
		pthread_cond_broadcast(&feed.trust);
	pthread_mutex_unlock(&feed.mu);
	if (!was) {
		comb_info("feed: capture link up, epoch %016" PRIx64, feed.epoch);
		/* Capture now delivers every event of this node too. */
		feed_local_set(false);
	}
}

/* Declares the feed down when three intervals passed since the last
 * heartbeat, not counting the time the thread could not listen. */
static void check_liveness(int64_t now)
{
	long long last = atomic_load(&feed.last_beat_ms);
	bool was;

	if (last == 0 ||
	    now - last - feed.deaf_ms <= (int64_t)FEED_MISSED_HEARTBEATS * feed.interval_ms)
		return;
	pthread_mutex_lock(&feed.mu);
	was = feed.alive;
	feed.alive = false;
	pthread_mutex_unlock(&feed.mu);
	if (!was)
		return;
	metrics_add(METRIC_FEED_LOSSES, 1);
	feed_local_set(true);
	interrupt_all("no heartbeat from capture for three intervals");
}

/* A mark of community s->community. */
static void on_mark(const struct comb_signal *s)
{
	bool gap = false;
	struct fcomm *c;

	pthread_mutex_lock(&feed.mu);
	c = find_locked(s->community);
	if (c && !c->trusted) {
		c->trusted = true;
		c->last_seq = s->seq;
		pthread_cond_broadcast(&feed.trust);
	} else if (c && s->seq > c->last_seq) {
		gap = true;
		c->last_seq = s->seq;
		c->generation++;
	}
	pthread_mutex_unlock(&feed.mu);
	if (gap) {
		metrics_add(METRIC_FEED_GAPS, 1);
		comb_warn("feed: community %" PRId64 " mark %" PRIu64
			  " is ahead of the signals received: interrupting its syncs",
			  s->community, s->seq);
		interrupt_subscribers(s->community);
	}
}

/* Counts signal s; returns false when its community is not followed. */
static bool count_signal(const struct comb_signal *s)
{
	uint64_t expected = 0;
	bool gap = false;
	struct fcomm *c;

	pthread_mutex_lock(&feed.mu);
	c = find_locked(s->community);
	if (c && c->trusted) {
		if (s->seq != c->last_seq + 1) {
			gap = true;
			expected = c->last_seq + 1;
			c->generation++;
		}
		c->last_seq = s->seq;
	} else if (c && s->seq == 1) {
		c->trusted = true;
		c->last_seq = 1;
		pthread_cond_broadcast(&feed.trust);
	}
	pthread_mutex_unlock(&feed.mu);
	if (gap) {
		metrics_add(METRIC_FEED_GAPS, 1);
		comb_warn("feed: community %" PRId64 " signal gap (seq %" PRIu64
			  " where %" PRIu64 " was due): interrupting its syncs",
			  s->community, s->seq, expected);
		interrupt_subscribers(s->community);
	}
	return c != NULL;
}

static void dispatch(const struct comb_signal *s)
{
	switch (s->type) {
	case COMB_SIGNAL_HEAD:
	case COMB_SIGNAL_MOVE:
	case COMB_SIGNAL_REDACTION:
		notify_listener(s);
		feed_live_push(s);
		break;
	case COMB_SIGNAL_MEMBER:
	case COMB_SIGNAL_CHANNEL:
	case COMB_SIGNAL_ADMIN:
		notify_listener(s);
		break;
	case COMB_SIGNAL_EVENT:
	case COMB_SIGNAL_EPHEMERAL:
		feed_live_push(s);
		break;
	default:
		break;  /* a newer type: counted, otherwise ignored */
	}
}

/* True when epoch was followed before and left: its messages are stale. */
static bool left_behind(uint64_t epoch)
{
	size_t i;

	for (i = 0; i < PAST_EPOCHS; i++) {
		if (feed.left[i] == epoch)
			return true;
	}
	return false;
}

static void handle(const struct comb_signal *s, int64_t now)
{
	metrics_add(METRIC_FEED_SIGNALS, 1);
	if (s->epoch != feed.epoch && left_behind(s->epoch)) {
		feed.stale++;
		return;
	}
	if (s->epoch != feed.epoch) {
		uint64_t old = feed.epoch;

		memmove(feed.left + 1, feed.left, sizeof(feed.left) - sizeof(feed.left[0]));
		feed.left[0] = old;
		feed.epoch = s->epoch;
		metrics_feed_epoch(s->epoch);
		/* A new leader is speaking: the former one's silence is not
		 * its missed heartbeats. It gets three intervals from here. */
		if (atomic_load(&feed.last_beat_ms) != 0) {
			atomic_store(&feed.last_beat_ms, (long long)now);
			feed.deaf_ms = 0;
		}
		if (old != 0) {
			char why[96];

			snprintf(why, sizeof(why), "capture epoch changed from %016" PRIx64
				 " to %016" PRIx64, old, s->epoch);
			interrupt_all(why);
		} else {
			comb_info("feed: following capture epoch %016" PRIx64, s->epoch);
		}
	}
	if (s->type == COMB_SIGNAL_HEARTBEAT) {
		if (s->community == 0)
			on_beat(now);
		else
			on_mark(s);
		return;
	}
	if (s->community <= 0)
		return;
	if (count_signal(s))
		dispatch(s);
	comb_debug("feed: %s signal of community %" PRId64 " seq %" PRIu64,
		   comb_signal_type_name(s->type), s->community, s->seq);
}

/* Receives one message from sub; returns false when none is waiting. */
static bool receive_one(void *sub)
{
	zmq_msg_t topic, body;
	struct comb_signal s;
	char err[160];
	bool ok;

	zmq_msg_init(&topic);
	if (zmq_msg_recv(&topic, sub, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&topic);
		return false;
	}
	ok = zmq_msg_more(&topic);
	zmq_msg_close(&topic);
	if (!ok) {
		feed.refused++;
		return true;
	}
	zmq_msg_init(&body);
	if (zmq_msg_recv(&body, sub, 0) < 0) {
		zmq_msg_close(&body);
		return true;
	}
	while (zmq_msg_more(&body)) {
		/* extra frames: not ours; drop the whole message */
		ok = false;
		zmq_msg_close(&body);
		zmq_msg_init(&body);
		if (zmq_msg_recv(&body, sub, 0) < 0)
			break;
	}
	if (ok && comb_signal_decode(zmq_msg_data(&body), zmq_msg_size(&body), &s,
				     err, sizeof(err)) == 0) {
		feed.received++;
		handle(&s, comb_monotonic_ms());
	} else {
		/* A message that cannot be read shows up as a gap later. */
		if (feed.refused++ < 10)
			comb_warn("feed: a message was refused: %s",
				  ok ? err : "unexpected frames");
	}
	zmq_msg_close(&body);
	return true;
}

/*
 * Opens a SUB socket for endpoint, served only by I/O thread number index
 * of feed.zctx, and connects it. Returns 0, or COMB_EIO with errbuf set.
 */
static int open_endpoint(const char *endpoint, int index, char *errbuf,
			 size_t errlen)
{
	int hwm = FEED_RCVHWM, zero = 0, ivl = 100, ivl_max = 1000;
	uint64_t affinity = (uint64_t)1 << index;
	void *sub = zmq_socket(feed.zctx, ZMQ_SUB);

	if (!sub)
		return comb_fail(errbuf, errlen, COMB_EIO, "zmq: %s",
				 zmq_strerror(zmq_errno()));
	feed.subs[feed.nsubs++] = sub;
	if (zmq_setsockopt(sub, ZMQ_AFFINITY, &affinity, sizeof(affinity)) ||
	    zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(sub, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl)) ||
	    zmq_setsockopt(sub, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max)))
		return comb_fail(errbuf, errlen, COMB_EIO, "zmq: %s",
				 zmq_strerror(zmq_errno()));
	if (zmq_connect(sub, endpoint))
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "cannot connect to %s: %s", endpoint,
				 zmq_strerror(zmq_errno()));
	return 0;
}

/*
 * Creates feed.zctx with one I/O thread per endpoint of list (a comma
 * separated list, as COMB_CAPTURE_ENDPOINT) and opens each endpoint's
 * socket. Returns 0, or an error with errbuf set; what was opened stays
 * in feed for close_endpoints.
 */
static int open_endpoints(const char *list, char *errbuf, size_t errlen)
{
	char endpoint[256];
	const char *p = list;
	int count = 0, rc;

	while ((rc = comb_list_next(&p, endpoint, sizeof(endpoint))) > 0)
		count++;
	if (rc < 0)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "COMB_CAPTURE_ENDPOINT: an endpoint is too long");
	if (count == 0)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "COMB_CAPTURE_ENDPOINT names no endpoint");
	if (count > MAX_ENDPOINTS)
		return comb_fail(errbuf, errlen, COMB_EIO,
				 "COMB_CAPTURE_ENDPOINT names %d endpoints, at most %d",
				 count, MAX_ENDPOINTS);
	feed.zctx = zmq_ctx_new();
	if (!feed.zctx || zmq_ctx_set(feed.zctx, ZMQ_IO_THREADS, count))
		return comb_fail(errbuf, errlen, COMB_EIO, "zmq: %s",
				 zmq_strerror(zmq_errno()));
	p = list;
	while (comb_list_next(&p, endpoint, sizeof(endpoint)) > 0) {
		rc = open_endpoint(endpoint, feed.nsubs, errbuf, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* Closes every endpoint's socket and the context. */
static void close_endpoints(void)
{
	while (feed.nsubs > 0)
		zmq_close(feed.subs[--feed.nsubs]);
	if (feed.zctx)
		zmq_ctx_term(feed.zctx);
	feed.zctx = NULL;
}

static void *feed_main(void *arg)
{
	int64_t now, listen_from;
	long timeout = feed.interval_ms / 4;
	bool drained;
	int i, j;

	(void)arg;
	if (timeout < 5)
		timeout = 5;
	if (timeout > 250)
		timeout = 250;
	subscribe("hb", 3);   /* the topic's NUL included */
	while (!atomic_load(&feed.stop)) {
		/* the wake eventfd first, then each endpoint's socket */
		zmq_pollitem_t items[1 + MAX_ENDPOINTS];

		memset(items, 0, sizeof(items));
		items[0].fd = feed.wake;
		items[0].events = ZMQ_POLLIN;
		for (j = 0; j < feed.nsubs; j++) {
			items[1 + j].socket = feed.subs[j];
			items[1 + j].events = ZMQ_POLLIN;
		}
		listen_from = comb_monotonic_ms();
		if (zmq_poll(items, 1 + feed.nsubs, timeout) < 0 && zmq_errno() != EINTR) {
			comb_error("feed: zmq_poll: %s", zmq_strerror(zmq_errno()));
			break;
		}
		now = comb_monotonic_ms();
		if (now - listen_from > timeout)
			feed.deaf_ms += now - listen_from - timeout;
		if (items[0].revents & ZMQ_POLLIN) {
			uint64_t n;

			if (read(feed.wake, &n, sizeof(n)) < 0 && errno != EAGAIN)
				comb_warn("feed: eventfd: %s", strerror(errno));
		}
		take_fresh(now);
		/* a message of each endpoint in turn, until all are drained */
		drained = false;
		for (i = 0; i < ROUND_MESSAGES && !drained; i += feed.nsubs) {
			drained = true;
			for (j = 0; j < feed.nsubs; j++)
				drained &= !receive_one(feed.subs[j]);
		}
		now = comb_monotonic_ms();
		/* Heartbeats still queued arrived in time: judge capture's
		 * liveness only on an empty queue, against each beat's own
		 * receive time, so a slow round never counts as missed beats
		 * (and a late poll, above, never counts as silence). */
		if (drained)
			check_liveness(now);
		ask_marks(now);
	}
	return NULL;
}

void feed_listen(const struct feed_listener *l)
{
	feed.listener = l;
}

int feed_start(struct relay *relay, char *errbuf, size_t errlen)
{
	pthread_condattr_t cattr;
	pthread_attr_t tattr;
	int err, rc;

	feed.interval_ms = relay->cfg.capture_heartbeat_ms;
	atomic_store(&feed.stop, false);
	atomic_store(&feed.last_beat_ms, 0);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&feed.trust, &cattr);
	pthread_condattr_destroy(&cattr);
	feed.wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (feed.wake < 0) {
		rc = comb_fail(errbuf, errlen, COMB_EIO, "eventfd: %s", strerror(errno));
		goto fail;
	}
	rc = open_endpoints(relay->cfg.capture_endpoint, errbuf, errlen);
	if (rc)
		goto fail;
	atomic_store(&feed.started, true);
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 512 * 1024);
	err = pthread_create(&feed.thread, &tattr, feed_main, NULL);
	pthread_attr_destroy(&tattr);
	if (err) {
		atomic_store(&feed.started, false);
		rc = comb_fail(errbuf, errlen, COMB_EIO,
			       "cannot start the feed thread: %s", strerror(err));
		goto fail;
	}
	comb_info("feed: following capture at %s (heartbeat %d ms)",
		  relay->cfg.capture_endpoint, feed.interval_ms);
	return 0;
fail:
	close_endpoints();
	if (feed.wake >= 0)
		close(feed.wake);
	feed.wake = -1;
	pthread_cond_destroy(&feed.trust);
	return rc;
}

void feed_stop(void)
{
	struct fcomm *c, *next;
	size_t b;

	if (!atomic_load(&feed.started))
		return;
	atomic_store(&feed.stop, true);
	wake_thread();
	pthread_join(feed.thread, NULL);
	close_endpoints();
	close(feed.wake);
	feed.wake = -1;
	pthread_mutex_lock(&feed.mu);
	atomic_store(&feed.started, false);
	for (b = 0; b < BUCKETS; b++) {
		for (c = feed.buckets[b]; c; c = next) {
			next = c->next;
			free(c);
		}
		feed.buckets[b] = NULL;
	}
	feed.fresh = NULL;
	feed.count = 0;
	pthread_mutex_unlock(&feed.mu);
	pthread_cond_destroy(&feed.trust);
	comb_info("feed: stopped after %" PRIu64 " messages (%" PRIu64 " refused, %" PRIu64
		  " of epochs left behind)", feed.received, feed.refused, feed.stale);
}
