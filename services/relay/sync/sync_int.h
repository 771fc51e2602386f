/*
 * Internals of artifact sync shared by current.c (filter, snapshot, EOSE,
 * the registry the capture feed looks syncs up in) and apply.c
 * (the workers that re-read changed artifacts and send frames), and the
 * small uuid map both use (uuid_map.c).
 *
 * Locks, never nested except as written: the registry's rwlock, then
 * (inside it) one sync's session mu or the workers' pool mu. The session
 * mu guards a sync's delivery state (dead, started, live); the pool mu
 * guards its held changes and scheduling. Database reads and frames are
 * done holding neither.
 */
#ifndef COMB_WS_SYNC_INT_H
#define COMB_WS_SYNC_INT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/db.h"
#include "session/session.h"

/* Distinct changed artifacts a sync may hold before it is closed with
 * `resync: too many held changes`. */
#define WS_SYNC_MAX_HELD 1024

/* ------------------------------------------------------------------ */
/* uuid maps (uuid_map.c) */

struct dmap_entry {
	uint8_t d[16];
	int64_t seq;
	bool used;
};

/* An open-addressing map from a binary uuid to a sequence number, with a
 * maximum number of entries. */
struct dmap {
	struct dmap_entry *slots;   /* cap entries; NULL while empty */
	size_t cap;                 /* a power of two, or 0 */
	size_t count;
	size_t max;
	/* when set, the slots count against this connection's budget
	 * (session.h, "budget.c"); held is what they count now */
	struct ws_session *budget;
	size_t held;
};

/* Prepares an empty map holding at most max entries. */
void dmap_init(struct dmap *m, size_t max);
/* Makes m's slots count against s's byte budget from now on (m empty). */
void dmap_budget(struct dmap *m, struct ws_session *s);
/* Frees the entries; the map stays usable and empty. */
void dmap_release(struct dmap *m);
/* Sets d to seq. Returns 0, COMB_ETOOBIG when d is new and the map holds
 * max entries already, COMB_EDENIED when its budget has no room for more
 * slots, or COMB_ENOMEM. */
int dmap_put(struct dmap *m, const uint8_t d[16], int64_t seq);
/* The entry of d, or NULL. */
struct dmap_entry *dmap_get(const struct dmap *m, const uint8_t d[16]);
/* Removes d (nothing when absent). */
void dmap_del(struct dmap *m, const uint8_t d[16]);

/* Parses a canonical uuid (36 characters) into 16 bytes. Returns 0 or
 * COMB_EINVAL. */
int sync_uuid_parse(const char *text, uint8_t out[16]);
/* Writes the canonical text of d (37 bytes with the NUL). */
void sync_uuid_format(const uint8_t d[16], char out[37]);

/* ------------------------------------------------------------------ */
/* who sends the CLOSED of a sync of either kind (sub.c) */

/* Guarded by the session's mu. */
struct sync_closing {
	bool live;                      /* EOSE decided: CLOSED goes out now */
	char dead_reason[300];          /* the CLOSED owed while not live */
};

/*
 * Closes base (a sync of session s) from the relay's side with reason;
 * the caller holds s->mu. Once live the CLOSED is pushed at once (using
 * the outbox's reserve); before, the opener sends it instead of EOSE.
 */
void sync_close_locked(struct ws_session *s, struct ws_sub *base,
		       struct sync_closing *c, const char *reason);

/* Drops base from s and sends CLOSED with message (the connection's
 * thread, while opening). */
void sync_refuse(struct ws_session *s, struct ws_sub *base, const char *message);

/*
 * The end of an opening: unless base was closed meanwhile, sends EOSE
 * and makes it live. One closed before is refused instead; one closed
 * while EOSE was on its way gets its CLOSED right after EOSE. Returns true
 * when base is live and its live phase is the caller's to start.
 */
bool sync_open_end(struct ws_session *s, struct ws_sub *base, struct sync_closing *c);

/* ------------------------------------------------------------------ */
/* one sync */

struct sync_sub {
	struct ws_sub base;             /* first: the session's list */
	struct ws_session *session;     /* borrowed */
	int64_t community;
	char (*channels)[37];           /* owned, sorted, distinct */
	size_t nchannels;
	char **types;                   /* owned, sorted; NULL: any type */
	size_t ntypes;
	struct dmap dfilter;            /* the #d values; count 0: any d */
	bool has_dfilter;
	bool registered;                /* in the registry */

	/* the opener, then one worker at a time */
	struct dmap known;              /* d -> accepted_seq the client holds */

	/* guarded by session->mu */
	bool started;                   /* past the trust check */
	struct sync_closing closing;

	/* guarded by the pool's mu (apply.c) */
	struct dmap pending;            /* changed d's not applied yet */
	bool access_check;              /* membership or policy changed */
	const char *overflow;           /* why pending could not hold a
					 * change (the CLOSED reason), or NULL */
	bool runnable;                  /* EOSE sent: the workers may apply */
	bool quiet;                     /* closed: nothing more is noted */
	bool scheduled, running, released;
	struct hub_turn turn;           /* in the workers' run queue */
};

/* ------------------------------------------------------------------ */
/* a sync's own questions, and closing it (sub.c) */

/* The orders sub->channels (an array of char[37]) and sub->types (an
 * array of strings) are sorted in and searched by (qsort comparators). */
int sync_cmp_channel(const void *a, const void *b);
int sync_cmp_type(const void *a, const void *b);

/* True when channel (canonical text) is one of sub's channels. */
bool sync_has_channel(const struct sync_sub *sub, const char *channel);

/* sub's own copy of channel (canonical text), or NULL when it is not one
 * of sub's channels. */
const char *sync_find_channel(const struct sync_sub *sub, const char *channel);

/* True when type is allowed by sub's #type (always without one). */
bool sync_has_type(const struct sync_sub *sub, const char *type);

/*
 * Closes sub from the relay's side with reason; the caller holds
 * sub->session->mu. Once live the CLOSED is pushed at once (using the
 * outbox's reserve); before, the opener sends it instead of EOSE.
 */
void sync_kill_locked(struct sync_sub *sub, const char *reason);

/* Same, taking the session's mu. */
void sync_kill(struct sync_sub *sub, const char *reason);

/* ------------------------------------------------------------------ */
/* access (apply.c) */

/* One question "may this reader read this channel of a sync now?". */
struct sync_probe {
	int64_t community;
	const char *channel;            /* borrowed canonical uuid */
	const char *reader;             /* borrowed pubkey hex */
	const struct reader_access *access; /* borrowed */
	bool readable;                  /* the answer */
};

/*
 * Answers n probes with one query on db, borrowed from dbs (inside the
 * caller's transaction when it has one), as the policy would for a
 * request naming each channel in #h; probes of the same community,
 * channel and reader share one row of it. then, SQL without parameters
 * (such as COMMIT) or NULL, runs right after the query in the same round
 * trip. Returns 0, or COMB_EUNAVAIL (the query or then failed; *budget
 * tells whether the query ran past the statement budget) or COMB_ENOMEM.
 */
int sync_probe_access(struct comb_db_pool *dbs, PGconn *db,
		      struct sync_probe *probes, size_t n, const char *then,
		      bool *budget);

/* ------------------------------------------------------------------ */
/* the workers (apply.c) */

/* Starts and stops the worker threads. */
int sync_workers_start(struct relay *relay, char *errbuf, size_t errlen);
void sync_workers_stop(void);

/* Prepares the scheduling fields of a new sync. */
void sync_sched_init(struct sync_sub *sub);

/*
 * Records that artifact d (NULL: the reader's access) of sub changed; the
 * change is held until sync_make_runnable and applied afterwards by a
 * worker. The feed thread calls it under the registry's read lock, for
 * every sync a signal concerns, between sync_note_begin (which takes the
 * pool's mu) and sync_note_end (which wakes the workers once and releases
 * it).
 */
void sync_note_begin(void);
void sync_note_change(struct sync_sub *sub, const uint8_t *d);
void sync_note_end(void);

/* The CLOSED reason when sub's held changes overflowed (too many, or
 * over the connection's budget), else NULL. */
const char *sync_overflowed(struct sync_sub *sub);

/* After EOSE: lets the workers apply what is held and what comes. */
void sync_make_runnable(struct sync_sub *sub);

/* Stops scheduling sub and waits until no worker uses it; it may then be
 * freed. Call after it left the registry. */
void sync_sched_release(struct sync_sub *sub);

#endif
