/*
 * Internals of artifact sync shared by sub.c (what a sync of either kind
 * asks of its filter and channels; its life is session/'s, struct
 * ws_sub), current.c (filter, snapshot, EOSE), apply.c (the `current` kind's turns: re-read
 * changed artifacts and send frames) and resume.c (the `changes` kind).
 * Artifacts are kept by their d's 16 bytes (comb_uuid_parse) in held maps
 * (session.h).
 *
 * Locks, never nested except as written: the hub's subscriptions' lock
 * (hub/, held around every kind callback but run), then (inside it) one
 * sync's session mu. The session mu guards a sync's delivery state (dead,
 * started, live); the hub's lock guards what signals note for it.
 * Database reads and frames are done holding neither.
 */
#ifndef COMB_WS_SYNC_INT_H
#define COMB_WS_SYNC_INT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/db.h"
#include "comb/readroute.h"
#include "hub/hub.h"
#include "session/session.h"

/* Distinct changed artifacts a sync may hold before it is closed with
 * `resync: too many held changes`. */
#define WS_SYNC_MAX_HELD 1024

/* ------------------------------------------------------------------ */
/* what a sync of either kind asks (sub.c) */

/* Refuses a filter holding a key outside keys (NULL-terminated):
 * `invalid: <what> takes no limit` (or offset), else `invalid: <what>
 * filter may hold only <allowed>`. Returns 0 or COMB_EINVAL with the
 * CLOSED message in why. */
int sync_check_keys(const json_t *filter, const char *const *keys, const char *what,
		    const char *allowed, char *why, size_t whylen);

/* ------------------------------------------------------------------ */
/* one sync */

struct sync_sub {
	struct ws_sub head;             /* first */
	int64_t community;
	char (*channels)[37];           /* owned, sorted, distinct */
	size_t nchannels;
	char **types;                   /* owned, sorted; NULL: any type */
	size_t ntypes;
	struct ws_held_map dfilter;     /* the #d values; count 0: any d */
	bool has_dfilter;

	/* the opener, then the worker running it */
	struct ws_held_map known;       /* d -> accepted_seq the client holds */
	comb_lsn seen_lsn;              /* the WAL position of the newest state
					 * its client was shown (the snapshot's,
					 * then each re-read's): no later read
					 * runs below it */
	int64_t access_epoch;           /* the community's access epoch
					 * (migrations/0022) in the last
					 * snapshot that found every channel
					 * readable */

	/* guarded by the hub's lock (apply.c) */
	struct ws_held_map pending;     /* changed d's not applied yet */
	bool access_check;              /* membership or policy changed */
	const char *overflow;           /* why pending could not hold a
					 * change (the CLOSED reason), or NULL */
	comb_lsn want_lsn;              /* the re-read runs where the noted
					 * signals' position has been replayed */
	bool quiet;                     /* closed: nothing more is noted */

	/* the worker running it: what it took from the above (the map is
	 * emptied after the run and swapped with pending at the next take) */
	struct ws_held_map taken;
	bool taken_access;
	const char *taken_overflow;
	comb_lsn taken_lsn;
	bool closed;                    /* the run closed it */
};

/* ------------------------------------------------------------------ */
/* a sync's own questions (sub.c) */

/* The orders sub->channels (an array of char[37]) and sub->types (an
 * array of strings) are sorted in and searched by (qsort comparators). */
int sync_cmp_channel(const void *a, const void *b);
int sync_cmp_type(const void *a, const void *b);

/* True when channel (canonical text) is one of sub's channels. */
bool sync_has_channel(const struct sync_sub *sub, const char *channel);

/* The access epochs of communities: parameter a bigint[] literal of
 * their ids; rows (id, access_epoch, the WAL position of the statement's
 * snapshot, COMB_READ_POSITION_SQL). */
extern struct comb_db_stmt sync_epochs_stmt;

/* The WAL position (comb/readroute.h) the epochs of sync_epochs_stmt were
 * read at, or 0 when it has no row. */
comb_lsn sync_epochs_position(const PGresult *epochs);

/* True when type is allowed by sub's #type (always without one). */
bool sync_has_type(const struct sync_sub *sub, const char *type);

/* ------------------------------------------------------------------ */
/* the kinds (apply.c, resume.c) */

/* A `current` sync (apply.c) and a resumable one (resume.c). */
extern const struct hub_kind sync_current_kind;
extern const struct hub_kind sync_changes_kind;

/* Prepares a new sync's held changes, counted against its connection's
 * budget. */
void sync_pending_init(struct sync_sub *sub);

/* The CLOSED reason when sub's held changes overflowed (too many, or
 * over the connection's budget), else NULL. */
const char *sync_overflowed(struct sync_sub *sub);

#endif
