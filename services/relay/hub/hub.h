/*
 * hub/: where signals about who may read arrive for every open
 * subscription of this node. Each authenticated WebSocket registers its
 * reader's access (struct reader_access, access.h) here; the hub listens
 * to the capture feed (feed/) ahead of every other listener and applies a
 * change of the reader's community admin status to that access at once,
 * on the feed's thread, before the feed hands on any later signal or
 * event. So a plain REQ's next delivery, a new REQ, a sync's access check
 * and a resumable sync's next read all see the new status, and nothing
 * written after the change reaches a reader who lost access
 * (docs/protocol.md, "Access changes reach open connections").
 *
 * The hub is below the subscriptions (session/, sync/, ws/): it never
 * names them, they register what it needs. The only public header of the
 * folder.
 */
#ifndef COMB_HUB_H
#define COMB_HUB_H

#include <stdbool.h>
#include <stddef.h>

#include "access.h"
#include "relay.h"

/*
 * Registers the hub with the capture feed. Call before any other
 * feed_listen (so that its listener runs first) and before feed_start.
 * Returns 0, or COMB_ETOOBIG / COMB_ENOMEM with errbuf set.
 */
int hub_start(struct relay *relay, char *errbuf, size_t errlen);

/* Forgets every registration. Call after feed_stop, once every connection
 * is closed. Safe when hub_start failed or never ran. */
void hub_stop(void);

/*
 * Registers ra (borrowed until hub_remove_reader returns): from now on an
 * admin signal for ra's community and pubkey sets ra->admin and counts
 * ra->generation. Returns 0 or COMB_ENOMEM.
 */
int hub_add_reader(struct reader_access *ra);

/* Unregisters ra (nothing when it is not registered). */
void hub_remove_reader(struct reader_access *ra);

/*
 * Loads whether ra's pubkey is a community admin from the database and
 * applies it, unless an admin signal arrived while it was loaded (the
 * signal is as new then). Call after hub_add_reader, from a thread that
 * may wait for the database: when the reader's status may have changed
 * without a signal reaching this node yet (at AUTH, when a subscription
 * opens: the operator's change may have committed a moment ago). Returns
 * 0 or COMB_EUNAVAIL.
 */
int hub_load_admin(struct relay *relay, const struct community *c,
		   struct reader_access *ra);

/*
 * Turns (turns.c): the run queue of the subscriptions' work, fair per
 * connection. Each connection is an owner with its own FIFO of turns; the
 * queue serves the owners in rotation, one turn each, so one connection
 * with many subscriptions waiting delays another's next turn by at most
 * one turn of its own, however many it holds. The queue has no lock of
 * its own: its user serializes every call (its pool's mutex).
 */
struct hub_turn;

/* The run queues of a node, one per kind of work (each served by its own
 * workers); a connection has a place in each. */
enum hub_queue_kind {
	HUB_QUEUE_SYNC,     /* current syncs' changes (sync/apply.c) */
	HUB_QUEUE_RESUME,   /* resumable syncs' reads (sync/resume.c) */
	HUB_QUEUES,
};

/* A connection's place in one queue; embedded in its session, zeroed. An
 * owner belongs to one queue only. */
struct hub_owner {
	struct hub_owner *next;         /* the ring of owners with turns */
	struct hub_turn *head, *tail;   /* its turns, first in first out */
	bool linked;                    /* in the ring */
};

/* One unit of queued work; embedded in a subscription. Set owner before
 * the first push; the rest is the queue's. */
struct hub_turn {
	struct hub_turn *next;
	struct hub_owner *owner;
	bool queued;
};

/* A run queue; zeroed is empty. */
struct hub_queue {
	struct hub_owner *head, *tail;
};

/* Queues t (not queued yet) after its owner's other turns. */
void hub_queue_push(struct hub_queue *q, struct hub_turn *t);

/* Takes the next turn: the first of the owner whose turn it is, which then
 * goes behind every other owner. NULL when q is empty. */
struct hub_turn *hub_queue_pop(struct hub_queue *q);

/* Takes t out of q (nothing when it is not queued). */
void hub_queue_remove(struct hub_queue *q, struct hub_turn *t);

/* Takes out of q, in the queue's order, up to max turns for which like(t,
 * ctx) is true (work that one read serves together) into out. Returns how
 * many. */
size_t hub_queue_take_if(struct hub_queue *q,
			 bool (*like)(const struct hub_turn *t, const void *ctx),
			 const void *ctx, struct hub_turn **out, size_t max);

/* True when nothing is queued. */
bool hub_queue_empty(const struct hub_queue *q);

#endif
