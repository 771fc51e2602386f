/*
 * Read routing over PostgreSQL streaming standbys (hot standby, physical
 * replication). Writes stay on the primary; a read may be served by a
 * standby that has replayed at least the WAL position (LSN) the read
 * names, so that no reader goes back in time:
 *
 *   - a cursor names the position of the snapshot it was read in;
 *   - a write acknowledged to a client names the position just after its
 *     commit (the relay keeps it per author in Redis: read-your-writes on
 *     every node);
 *   - a live signal names the position at which capture saw the change.
 *
 * A reader asks for a connection "at least at position P": a standby in
 * rotation known to have replayed P is lent at once; otherwise the reader
 * waits up to the bounded wait (COMB_READ_WAIT_MS) for one to get there,
 * then is lent a primary connection (a fallback). A monitor thread per
 * server samples the primary's WAL insert position and each standby's
 * replay position; a standby that cannot be reached, or lags more than
 * COMB_READ_MAX_LAG_MS behind the primary, leaves the rotation and comes
 * back once it lags no more than half of that. The positions known for a
 * standby only ever grow and are lower bounds, so a lent standby has
 * replayed P whatever happened since it was sampled.
 *
 * With no standby configured every read is lent a primary connection at
 * once, with no wait and no monitor thread.
 */
#ifndef COMB_READROUTE_H
#define COMB_READROUTE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/db.h"

/* Most standbys one router serves. */
#define COMB_READ_MAX_STANDBYS 8

/* A WAL position as PostgreSQL's pg_lsn, as one 64-bit number; 0 names no
 * position (every server is at least there). */
typedef uint64_t comb_lsn;

/* A position only the primary is known to have: a read that asks for it
 * goes to the primary without waiting. */
#define COMB_READ_PRIMARY UINT64_MAX

/* The text of a pg_lsn ("16/B374D848") for lsn, in out (at least 24
 * bytes). */
void comb_lsn_format(comb_lsn lsn, char *out, size_t outlen);

/* Parses pg_lsn text; returns 0, or COMB_EINVAL (and *out 0). */
int comb_lsn_parse(const char *text, comb_lsn *out);

/* The SQL expression (text) of the position a statement's snapshot has
 * seen: on the primary its WAL insert position, on a standby its replay
 * position, evaluated after the statement's snapshot was taken so that
 * every commit the snapshot sees lies at or below it. */
#define COMB_READ_POSITION_SQL                                              \
	"(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"      \
	" ELSE pg_current_wal_insert_lsn() END)::text"

struct comb_read_router;

struct comb_read_options {
	const char *primary_conninfo; /* the primary's (for the monitor) */
	const char *standby_urls;     /* comma-separated conninfo URLs; "" none */
	int pool_size;                /* connections per standby */
	int statement_timeout_ms;     /* as for the primary's pool */
	const char *warm_sql;         /* comb_db_pool_warm of every standby pool, or NULL */
	int wait_ms;                  /* the bounded wait for a standby */
	int max_lag_ms;               /* beyond it a standby leaves the rotation */
};

/*
 * Creates a router that lends connections of primary (borrowed: the
 * caller keeps and frees it) and of one pool per standby of
 * opts->standby_urls, and starts its monitor threads when there are
 * standbys. Returns 0, COMB_EINVAL (errbuf says why: more than
 * COMB_READ_MAX_STANDBYS, or an empty entry) or COMB_ENOMEM.
 */
int comb_read_router_new(struct comb_db_pool *primary,
			 const struct comb_read_options *opts,
			 struct comb_read_router **out, char *errbuf,
			 size_t errlen);

/* Stops the monitor threads and frees the router and its standby pools.
 * No connection may be lent out. NULL is a no-op. */
void comb_read_router_free(struct comb_read_router *r);

/* How many standbys the router was configured with. */
int comb_read_standbys(const struct comb_read_router *r);

/* A connection lent by comb_read_acquire. */
struct comb_read_lease {
	PGconn *conn;
	struct comb_db_pool *pool; /* the pool conn is from (for its statements) */
	int server;                /* the standby's index, or -1: the primary */
};

/*
 * Lends a connection of a server that has replayed at least position
 * at_least (0: any): a standby in rotation known to be there (round
 * robin), else, after waiting up to the router's bounded wait for one to
 * get there, the primary (at once for COMB_READ_PRIMARY). pool_wait_ms bounds the wait for a free
 * connection of the chosen pool; a standby whose pool cannot lend one is
 * passed over for the primary. Returns 0, or COMB_EUNAVAIL when not even
 * the primary could lend one (the caller answers 503).
 */
int comb_read_acquire(struct comb_read_router *r, comb_lsn at_least,
		      int pool_wait_ms, struct comb_read_lease *out);

/*
 * Gives the lease's connection back; broken drops it. A standby whose
 * connection broke is sampled again before it is chosen again. Clears
 * *lease; a cleared lease is a no-op.
 */
void comb_read_release(struct comb_read_router *r, struct comb_read_lease *lease,
		       bool broken);

/* What /metrics shows of one standby. */
struct comb_read_standby_stats {
	char name[128];        /* host:port/dbname of its URL, no password */
	bool in_rotation;
	bool reachable;        /* its last sample succeeded */
	long long lag_ms;      /* behind the primary at its last sample */
	comb_lsn replayed;     /* its replay position at its last sample */
	long served;           /* reads lent one of its connections */
};

/* What /metrics shows of the router. */
struct comb_read_stats {
	int standbys;
	long primary_served;   /* reads lent a primary connection */
	long waits;            /* reads that waited for a standby to catch up */
	long fallbacks;        /* reads sent to the primary although standbys
				* are configured (none was there in time) */
	struct comb_read_standby_stats standby[COMB_READ_MAX_STANDBYS];
};

void comb_read_stats(struct comb_read_router *r, struct comb_read_stats *out);

#endif
