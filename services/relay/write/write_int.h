/*
 * What the files of write/ call of each other: the helpers of writer.c
 * every writer uses, and the writer of each kind the dispatcher (events.c)
 * hands events to.
 */
#ifndef COMB_WRITE_INT_H
#define COMB_WRITE_INT_H

#include <stdbool.h>

#include "comb/buf.h"
#include "comb/event.h"
#include "write.h"

/* Sets out to 503 and marks the connection when it was lost; use after a
 * failed statement. Rolls back any open transaction. */
void write_db_failed(struct writer *w, struct write_result *out);

/* True when created_at is within the configured window of now. */
bool write_is_fresh(const struct writer *w, const struct comb_event *ev);

/* Runs a statement without parameters; false on failure. */
bool write_exec(struct writer *w, const char *sql);

/*
 * Read-your-writes (readpos.h): records, for authors[0..n) of community c,
 * the WAL position read on db right after their writes committed there,
 * before they are answered. A no-op when the node reads from no standby;
 * a failure is logged (the writes stand; their authors may then read from
 * a standby that has not replayed them yet).
 */
void write_note_position(struct relay *relay, PGconn *db,
			 const struct community *c, const char *const *authors,
			 size_t n);

/*
 * Inserts ev into events (and its single-letter tags but h, its
 * channel, into event_tags)
 * inside the caller's transaction, with channel_id (NULL for none).
 * *inserted is false when the community already had this event id; an
 * event it inserted is also kept in the node's revision cache.
 * Returns 0, or COMB_EUNAVAIL / COMB_ENOMEM.
 */
int write_store_event(struct writer *w, const struct comb_event *ev,
		      const char *channel_id, bool *inserted);

/*
 * Inserts the n events evs[i], each in community communities[i] with
 * channel channels[i] (NULL for none), with one statement inside the
 * caller's transaction, exactly as n write_store_event calls in this
 * order would, except that live delivery is not told (the caller tells
 * feed_local_stored of each event it delivers). inserted[i] is false
 * when the community already had evs[i]'s id, from before or from an
 * earlier element. Returns 0, or COMB_EUNAVAIL / COMB_ENOMEM, after
 * which the caller rolls back whatever the statement did.
 */
int write_store_events(struct writer *w, const struct comb_event *const *evs,
		       const struct community *const *communities,
		       const char *const *channels, size_t n, bool *inserted);

/* What the database functions take of an event besides its id, pubkey
 * and kind: its JSON as received, its tags as JSON, its created_at. */
struct event_params {
	struct comb_buf raw;
	char *tags;
	char created_at[24];
};

/* Fills p from ev; returns 0 or COMB_ENOMEM. Release p with
 * write_event_params_release either way. */
int write_event_params(const struct writer *w, const struct comb_event *ev,
		       struct event_params *p);
void write_event_params_release(struct event_params *p);

/*
 * Keeps the bytes raw of an event this write inserted, as seq (text), in
 * the node's revision cache, so that reads on this node find it there.
 * Done before the transaction commits: a rolled-back insert's seq is
 * never used again, so no read ever asks for it.
 */
void write_keep_stored(struct writer *w, const char *seq, const struct comb_buf *raw);

/* The checks before any kind's writer (events.c): the author is the
 * authenticated user and the rate limit allows one more write. Returns
 * false after filling out. */
bool write_admit(struct writer *w, const struct comb_event *ev,
		 struct write_result *out);

/* Hands ev to its kind's writer (events.c); out starts accepted. */
void write_dispatch(struct writer *w, const struct comb_event *ev,
		    struct write_result *out);

/* True when ev must have a transaction of its own instead of joining a
 * group-commit batch (events.c): everything but chat messages and
 * artifact writes that stay in their channel. */
bool write_runs_alone(const struct comb_event *ev);

struct feed_local;

/* One write of a run of writes of one kind that write_run applies in
 * one step of a group-commit batch (batch.c). */
struct write_item {
	const struct community *community;  /* borrowed */
	const struct comb_event *ev;        /* borrowed */
	struct write_result *out;           /* borrowed; always set */
	/* What to deliver once the transaction committed (feed.h); the
	 * caller's after a success, NULL when nothing. */
	struct feed_local *live;
};

/* Sets it->live once a run writer decided it (writer.c): the event, when
 * inserted now (in channel h), for live delivery after the commit, and
 * its answer. */
void write_item_deliver(struct write_item *it, bool inserted, const char *h);

/* True when next may join a run that starts with first (events.c):
 * both chat messages, or both artifact writes that are not moves. */
bool write_joins_run(const struct comb_event *first,
		     const struct comb_event *next);

/*
 * Applies the n writes of items, a run (write_joins_run) in arrival
 * order (each item's out set to an acceptance and live to NULL first, so
 * that the kind's run writer only refuses), inside the caller's open transaction (w->batched, in savepoint
 * "w") with the answers their kind's writer would give them one after
 * another, each seeing the ones before it, in a few statements for the
 * whole run (events.c dispatches to the kind's run writer below).
 * Returns 0 with every item's out and live set; or, when a statement
 * failed, COMB_EUNAVAIL or COMB_ENOMEM after rolling back to savepoint
 * "w" (w->db_broken tells whether the connection was lost): the caller
 * then runs each write alone.
 */
int write_run(struct writer *w, struct write_item *items, size_t n);

/* Kind handlers, each in its own file. */
void write_chat(struct writer *w, const struct comb_event *ev,
		struct write_result *out);        /* kind 9 (chat.c) */

/*
 * The run writer of chat messages (chat.c): one statement loads the facts
 * of all of them (access_load_writes), the policy decides each, one
 * statement stores the accepted ones (write_store_events). Chat messages
 * never change what another chat message is allowed to do, so deciding
 * them all on the same facts is the same as deciding them in order.
 */
int write_chat_run(struct writer *w, struct write_item *items, size_t n);
void write_deletion(struct writer *w, const struct comb_event *ev,
		    struct write_result *out);    /* kind 5 (chat.c) */
void write_moderation(struct writer *w, const struct comb_event *ev,
		      struct write_result *out);  /* 9000-9022 (moderation.c) */
void write_ephemeral(struct writer *w, const struct comb_event *ev,
		     struct write_result *out);   /* 20000-29999 (ephemeral.c) */
/* Applies a kind-45010 event with every rule of PROTOCOL.md section 5
 * (artifact_write.c). */
void write_artifact(struct writer *w, const struct comb_event *ev,
		    struct write_result *out);
/* The run writer of artifact writes that are not moves (artifact_write.c):
 * one call of comb_artifact_write_run for the run. */
int write_artifact_run(struct writer *w, struct write_item *items, size_t n);

/*
 * Redacts the artifact revision target_id (a stored kind-45010 event of
 * this community; the caller checked the redactor's permission in its
 * channel) inside the caller's open transaction: withholds its title,
 * content and client tags everywhere and stamps the head when it is the
 * current revision. redaction is the kind-9005 event (its created_at is
 * the marker's). Redacting an already redacted revision changes nothing.
 * Returns 0, COMB_ENOTFOUND when target_id is not an accepted revision of
 * this community, COMB_ENOMEM or COMB_EUNAVAIL (artifact_redact.c).
 */
int artifact_redact(struct writer *w, const char *target_id,
		    const struct comb_event *redaction);

#endif
