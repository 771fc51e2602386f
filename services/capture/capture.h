/*
 * comb-capture's internals, shared by its files: the process state and the
 * functions each file exports.
 *
 * The files are layers and calls only go down, in this order:
 *   main.c         the loop: owns the process, calls every layer below
 *   metrics.c      the HTTP endpoint: reads struct capture_stats only
 *   ephemeral.c    the Redis thread; hands its messages to publish.c
 *   leader.c       leadership and the database connection; hands
 *                  notifications and catch-ups to listen.c
 *   listen.c       notifications and the horizon; numbers changes through
 *                  publish.c
 *   publish.c      the XPUB socket, epoch, seqs, heartbeats and marks
 *   communities.c  the per-community table
 * Every timer of the loop (lock retries, pings, heartbeats, grace periods)
 * is measured in comb_monotonic_ms (comb/clock.h).
 * A layer reads the state of struct capture (below) but never calls a file
 * above it.
 *
 * One thread (main.c's loop) owns the PostgreSQL connection, the ZeroMQ
 * publishing socket, the epoch and every sequence number, so signals are
 * numbered and sent in one place. The Redis subscriber runs in its own
 * thread (ephemeral.c) and hands messages over an inproc ZeroMQ socket.
 */
#ifndef COMB_CAPTURE_H
#define COMB_CAPTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "comb/buf.h"
#include "comb/clock.h"
#include "comb/config.h"
#include "comb/signal.h"

/* How often a standby asks for the lock, in milliseconds. */
#define CAPTURE_LOCK_RETRY_MS 500
/* A leader whose database does not answer a ping for this long gives up
 * leadership (well before the server drops its session, and the lock,
 * through its own keepalive settings, see leader.c). */
#define CAPTURE_PING_TIMEOUT_MS 2000
/* A leader that lost its database connection keeps its epoch (and keeps
 * sending heartbeats) for at most this long while it reconnects and
 * catches up; after that it ends the epoch (see leader.c). */
#define CAPTURE_GRACE_MS 5000
/* How often a leader in its grace period tries to reconnect. */
#define CAPTURE_RECONNECT_MS 100
/* How often a leader asks whether a standby streams from the primary
 * (listen_check_standbys). */
#define CAPTURE_STANDBY_CHECK_MS 1000
/* The most transaction ids remembered as published above the horizon
 * (catch-up skips them); beyond it catch-up may repeat a signal. */
#define CAPTURE_SEEN_MAX 4096
/* The most in-progress transactions of a catch-up snapshot. */
#define CAPTURE_SNAPSHOT_MAX_XIP 65536
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
struct capture_metrics;

/* Signal counters by type: the types of comb/signal.h, then marks (a
 * heartbeat of one community). */
#define CAPTURE_STAT_MARK (COMB_SIGNAL_LAST_KNOWN + 1)
#define CAPTURE_STAT_TYPES (CAPTURE_STAT_MARK + 1)

/*
 * What capture's metrics endpoint reports (metrics.c). The main loop and
 * the Redis thread write these, the endpoint's threads read them, so every
 * field is atomic.
 */
struct capture_stats {
	atomic_ullong signals[CAPTURE_STAT_TYPES]; /* sent, by type */
	atomic_ullong notifications; /* change notifications received */
	atomic_ullong caught_up;     /* signals published by catch-ups */
	atomic_ullong rejected;      /* notifications or messages refused */
	atomic_ullong epochs;        /* epochs started */
	atomic_ullong epoch;         /* the current epoch, 0 before the first */
	atomic_ullong db_lost;       /* database connections lost */
	atomic_ullong redis_lost;    /* Redis subscriptions lost */
	atomic_llong heartbeat_unix_ms; /* wall time of the last heartbeat */
	atomic_llong loop_ms;        /* comb_monotonic_ms of the loop's last turn */
	atomic_bool leader;          /* holds the capture lock */
	atomic_bool reconnecting;    /* in the grace period of a lost connection */
	atomic_bool db_connected;    /* has a database connection */
	atomic_bool redis_connected; /* the Redis subscription is live */
};

/*
 * What capture knows about which changes it published (listen.c): every
 * change with a transaction id below horizon was published; seen holds
 * the ids at or above it already published from notifications. After a
 * catch-up, the catch-up snapshot tells which notifications still to come
 * were published by the catch-up itself.
 */
struct capture_horizon {
	uint64_t horizon;       /* 0: none yet (no catch-up possible) */
	uint64_t seen[CAPTURE_SEEN_MAX];
	size_t nseen;
	bool seen_full_warned;
	bool snap_active;       /* the catch-up snapshot below applies */
	uint64_t snap_xmin, snap_xmax;
	uint64_t *snap_xip;     /* in progress at the snapshot, sorted */
	size_t snap_nxip;
};

struct capture {
	struct comb_config cfg;
	void *zctx;             /* ZeroMQ context */
	void *pub;              /* XPUB socket, bound to endpoint */
	void *pull;             /* inproc PULL from the Redis thread */
	char endpoint[256];     /* the endpoint pub is bound to */
	struct ephemeral *eph;  /* the Redis thread */

	PGconn *pg;             /* the listening connection, or NULL */
	PGconn *pos_pg;         /* the connection that reads WAL positions
				 * (listen_position), or NULL */
	bool positions_wanted;  /* a standby streamed from the primary at the
				 * last check, or none was made yet */
	int64_t standbys_checked_ms;
	bool leader;            /* holds the advisory lock and LISTENs */
	bool standby_logged;    /* "another instance leads" said once */
	int64_t next_try_ms;    /* standby: next lock attempt */
	bool ping_pending;      /* leader: a horizon marker is in flight */
	int64_t ping_sent_ms;
	int64_t next_beat_ms;   /* leader: next heartbeat */
	bool reconnecting;      /* lost the database, keeping the epoch */
	int64_t grace_until_ms; /* reconnecting: when the epoch ends */
	struct capture_horizon hz;

	uint64_t epoch;         /* current epoch, 0 before the first */
	uint64_t tick;          /* heartbeats sent in this epoch */
	struct communities communities;
	struct comb_buf out;    /* encoding buffer */

	struct capture_stats stats;
	struct capture_metrics *metrics; /* the HTTP endpoint, or NULL */
};

/* True while heartbeats, marks and ephemeral signals are sent: leading,
 * or in the grace period of a lost connection (leader.c sets both). */
static inline bool capture_publishing(const struct capture *cap)
{
	return cap->leader || cap->reconnecting;
}

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
/* Starts a new epoch: a new random epoch, every seq back to 0 and a mark
 * for every community a subscriber asked for. The horizon is listen.c's:
 * callers go through listen_restart. */
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
 * LISTENs and starts a new epoch, or, in a grace period after a lost
 * connection, catches up and continues the epoch. Leader: once per
 * heartbeat interval pings the database with a horizon marker and gives
 * up leadership when a ping is overdue. */
void leader_tick(struct capture *cap, int64_t now);
/* Reads what the leader's connection has for us: ping answers and
 * notifications (handed to listen_notification). */
void leader_readable(struct capture *cap);
/* Closes the connection at shutdown (which frees the lock at once). */
void leader_release(struct capture *cap);

/* listen.c */

/* The payload prefix of the leader's own horizon markers. */
#define CAPTURE_HORIZON_PREFIX "horizon "

/* Maps one notification payload to a signal and publishes it, stamped
 * with WAL position lsn (listen_position, read after the notification
 * arrived), unless an earlier catch-up published it. A horizon marker
 * advances the horizon. A payload that does not parse starts a new epoch,
 * since a change may be lost. */
void listen_notification(struct capture *cap, const char *payload, uint64_t lsn);

/*
 * The primary's WAL insert position now, read on a connection of its own
 * (the listening one may have a query in flight): at or after the commit
 * of every change whose notification has arrived, so that a relay re-reads
 * it only where it has been replayed (the "l" of comb/signal.h). 0, which
 * sends relays to the primary, while no standby streams from it
 * (listen_check_standbys: no standby could have replayed the change, and
 * the round trip is spared), and when it cannot be read: that connection
 * is opened only when leadership is taken (listen_position_connect), never
 * while notifications wait, so that a slow connect never holds up a
 * publishing leader's heartbeats; until the next leadership, signals then
 * carry no position.
 */
uint64_t listen_position(struct capture *cap);

/* Opens the connection listen_position reads on, unless it is open (a
 * warning when it cannot be), and counts positions as wanted until
 * listen_check_standbys says otherwise. Called when leadership is taken. */
void listen_position_connect(struct capture *cap);

/* Every CAPTURE_STANDBY_CHECK_MS (and at the first call after
 * listen_position_connect): whether any standby streams from the primary
 * (pg_stat_replication), which decides whether signals carry positions.
 * On listen_position's connection; a failure closes it as there. */
void listen_check_standbys(struct capture *cap, int64_t now);
/*
 * Publishes, with the current epoch and continuing seqs, a signal for
 * every change stamped at or after the horizon that is not known to be
 * published, in transaction id order, read in one snapshot on conn (which
 * already LISTENs). Returns 0, or COMB_EUNAVAIL with the reason in errbuf
 * (nothing was published then).
 */
int listen_catch_up(struct capture *cap, PGconn *conn, char *errbuf,
		    size_t errlen);
/* Forgets the horizon and starts a new epoch (publish_new_epoch). */
void listen_restart(struct capture *cap);
void listen_release(struct capture *cap);

/* metrics.c */

/* Starts the HTTP endpoint on cfg.capture_metrics_listen (nothing when
 * it is empty): GET /metrics and GET /healthz. Returns 0 or COMB_EIO with
 * the reason in errbuf. */
int capture_metrics_start(struct capture *cap, char *errbuf, size_t errlen);
/* Notes the loop's state for the endpoint (the main loop, each turn). */
void capture_metrics_sample(struct capture *cap, int64_t now);
/* Stops the endpoint, if any. */
void capture_metrics_stop(struct capture *cap);

/* ephemeral.c */

/* Starts the Redis subscriber thread for cfg.redis_url. Returns 0 or a
 * negative COMB_E* code with the reason in errbuf. */
int ephemeral_start(struct capture *cap, char *errbuf, size_t errlen);
/* Stops and joins the thread. */
void ephemeral_stop(struct capture *cap);
/* Forwards the messages waiting on cap->pull (drops them when not
 * publishing, see capture_publishing). */
void ephemeral_drain(struct capture *cap);

#endif
