/*
 * comb-capture's internals, shared by its files: the process state and the
 * functions each file exports to main.c's loop.
 *
 * One thread (main.c's loop) owns the PostgreSQL connection, the ZeroMQ
 * publishing socket, the epoch and every sequence number, so signals are
 * numbered and sent in one place. The Redis subscriber runs in its own
 * thread (ephemeral.c) and hands messages over an inproc ZeroMQ socket.
 */
#ifndef COMB_CAPTURE_H
#define COMB_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "comb/buf.h"
#include "comb/config.h"
#include "comb/signal.h"

/* How often a standby asks for the lock, in milliseconds. */
#define CAPTURE_LOCK_RETRY_MS 500
/* A leader whose database does not answer a ping for this long gives up
 * leadership (well before the server drops its session, and the lock,
 * through its own keepalive settings, see leader.c). */
#define CAPTURE_PING_TIMEOUT_MS 2000
/* Marks are repeated for a community this many heartbeats after its last
 * signal, so that a lost last signal is noticed. */
#define CAPTURE_MARK_TICKS 4
/* The most communities capture keeps a sequence number for. */
#define CAPTURE_MAX_COMMUNITIES (1 << 20)
/* The inproc endpoint between the Redis thread and the main loop. */
#define CAPTURE_EPHEMERAL_ENDPOINT "inproc://comb-capture-ephemeral"

/* Per-community state of the current epoch (communities.c). */
struct community {
	int64_t id;           /* 0: free slot */
	uint64_t seq;         /* last seq given in this epoch, 0 when none */
	uint64_t last_tick;   /* heartbeat tick of the last signal */
	bool subscribed;      /* some subscriber asked for its topics */
};

struct communities {
	struct community *slots; /* cap entries, open addressing */
	size_t cap;
	size_t count;
	bool full_warned;
};

struct ephemeral;

struct capture {
	struct comb_config cfg;
	void *zctx;             /* ZeroMQ context */
	void *pub;              /* XPUB socket, bound to endpoint */
	void *pull;             /* inproc PULL from the Redis thread */
	char endpoint[256];     /* the endpoint pub is bound to */
	struct ephemeral *eph;  /* the Redis thread */

	PGconn *pg;             /* the listening connection, or NULL */
	bool leader;            /* holds the advisory lock and LISTENs */
	bool standby_logged;    /* "another instance leads" said once */
	int64_t next_try_ms;    /* standby: next lock attempt */
	bool ping_pending;      /* leader: a SELECT 1 is in flight */
	int64_t ping_sent_ms;
	int64_t next_beat_ms;   /* leader: next heartbeat */

	uint64_t epoch;         /* current epoch, 0 before the first */
	uint64_t tick;          /* heartbeats sent in this epoch */
	struct communities communities;
	struct comb_buf out;    /* encoding buffer */

	uint64_t published;     /* signals sent (heartbeats and marks too) */
	uint64_t rejected;      /* notifications or messages refused */
};

/* Milliseconds of a monotonic clock. */
int64_t capture_now_ms(void);

/* communities.c */

/* Prepares an empty table. Returns 0 or COMB_ENOMEM. */
int communities_init(struct communities *t);
void communities_release(struct communities *t);
/* Finds community id (> 0), adding it when create is set. Returns NULL
 * when absent (create unset), when the table is full or out of memory. */
struct community *communities_get(struct communities *t, int64_t id,
				  bool create);
/* Forgets every sequence number (a new epoch); subscriptions stay. */
void communities_reset(struct communities *t);

/* publish.c */

/*
 * Creates the XPUB socket and binds it to the first endpoint of the
 * comma-separated list cfg.capture_endpoint that can be bound. Returns 0,
 * or COMB_EIO with the reason in errbuf.
 */
int publish_open(struct capture *cap, char *errbuf, size_t errlen);
void publish_close(struct capture *cap);
/* Starts a new epoch: a new random epoch, every seq back to 0, and a mark
 * for every community a subscriber asked for. */
void publish_new_epoch(struct capture *cap);
/* Numbers s (epoch, and seq for its community) and sends it. Only the
 * leader calls this. Returns 0 or a negative COMB_E* code (logged). */
int publish_signal(struct capture *cap, struct comb_signal *s);
/* Sends the liveness heartbeat and the marks of recently active
 * communities, and advances the tick. */
void publish_heartbeat(struct capture *cap);
/* Reads the subscription messages waiting on the XPUB socket, remembers
 * the communities asked for and, when leading, answers each with a mark. */
void publish_subscriptions(struct capture *cap);

/* leader.c */

/* Standby: when due, connects and tries the advisory lock; on success
 * LISTENs and starts a new epoch. Leader: pings the database once per
 * heartbeat interval and gives up leadership when a ping is overdue. */
void leader_tick(struct capture *cap, int64_t now);
/* Reads what the leader's connection has for us: ping answers and
 * notifications (handed to listen_notification). */
void leader_readable(struct capture *cap);
/* Gives up leadership (or the standby connection) after a failure, says
 * why, and retries after CAPTURE_LOCK_RETRY_MS. */
void leader_drop(struct capture *cap, const char *why);
/* Closes the connection at shutdown (which frees the lock at once). */
void leader_release(struct capture *cap);

/* listen.c */

/* Maps one notification payload to a signal and publishes it. A payload
 * that does not parse starts a new epoch, since a change may be lost. */
void listen_notification(struct capture *cap, const char *payload);

/* ephemeral.c */

/* Starts the Redis subscriber thread for cfg.redis_url. Returns 0 or a
 * negative COMB_E* code with the reason in errbuf. */
int ephemeral_start(struct capture *cap, char *errbuf, size_t errlen);
/* Stops and joins the thread. */
void ephemeral_stop(struct capture *cap);
/* Forwards the messages waiting on cap->pull (drops them when not
 * leading). */
void ephemeral_drain(struct capture *cap);

#endif
