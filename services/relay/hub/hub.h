/*
 * hub/: what every kind of subscription of this node is built on, and
 * where signals about who may read arrive for all of them.
 *
 * - Readers (readers.c): each authenticated WebSocket registers its
 *   reader's access (struct reader_access, access.h) here; the capture
 *   feed hands every signal to hub_signal ahead of every other listener,
 *   which applies a change of the reader's community admin status to that
 *   access at once, on the feed's thread, before the feed hands on any
 *   later signal or event. So a plain REQ's next delivery, a new REQ, a
 *   sync's access check and a resumable sync's next read all see the new
 *   status, and nothing written after the change reaches a reader who
 *   lost access (docs/protocol.md, "Access changes reach open
 *   connections").
 * - Registry (registry.c): subscriptions by community and channel.
 * - Turns (turns.c): the run queues with fair turns per connection.
 *
 * The hub is the lowest layer of the relay's folders, below the feed and
 * the subscriptions (feed/, session/, sync/, ws/): it never names them,
 * they register what it needs. The only public header of the folder.
 */
#ifndef COMB_HUB_H
#define COMB_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "comb/readroute.h"
#include "comb/signal.h"
#include "relay.h"

/*
 * Takes one capture signal (borrowed): an admin signal sets the status of
 * every registered reader it names; other signals are not the hub's.
 * main.c registers it as the capture feed's first listener, so that it
 * runs before any later signal or event is handed on. Only takes a lock
 * held briefly; any thread.
 */
void hub_signal(const struct comb_signal *s);

/* Forgets every registration. Call after feed_stop, once every connection
 * is closed. */
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
 * Loads whether ra's pubkey is a community admin of c from the primary
 * and applies it, unless an admin signal arrived while it was loaded (the
 * signal is as new then); with primary_at, also stores the primary's WAL
 * position taken in the same statement: a read that must see everything
 * committed before now asks a standby for at least that (comb/readroute.h).
 * Call after hub_add_reader, from a thread that may wait for the database:
 * when the reader's status may have changed without a signal reaching this
 * node yet (at AUTH, when a subscription opens: the operator's change may
 * have committed a moment ago). Returns 0 or COMB_EUNAVAIL.
 */
int hub_load_admin(struct relay *relay, const struct community *c,
		   struct reader_access *ra, comb_lsn *primary_at);

/*
 * Registry (registry.c): the subscriptions of this node by community and
 * channel, so that a signal of one channel finds the subscriptions that
 * cover it without looking at the others. A registration names channels
 * (each registered once, whatever repeats) or none, for every channel of
 * its community (the community-wide slot, channel ""). The registry has no
 * lock of its own: its user serializes every call and every use of a
 * slot it found (each kind of subscription keeps a registry of its own,
 * under a lock that fits how it delivers).
 */
#define HUB_BUCKETS 4096

/* The subscriptions registered for one (community, channel). */
struct hub_slot {
	struct hub_slot *next;
	int64_t community;
	char channel[37];               /* "" for the community-wide slot */
	void **members;                 /* the registrations (borrowed) */
	size_t n, cap;
};

/* A registry; zeroed is empty. */
struct hub_registry {
	struct hub_slot *buckets[HUB_BUCKETS];
};

/* Registers member for channels[0..nchannels) of community, or with no
 * channel for the community-wide slot. All or nothing: returns 0 or
 * COMB_ENOMEM (nothing registered then). */
int hub_registry_add(struct hub_registry *r, int64_t community,
		     const char (*channels)[37], size_t nchannels, void *member);

/* Undoes hub_registry_add with the same arguments. */
void hub_registry_remove(struct hub_registry *r, int64_t community,
			 const char (*channels)[37], size_t nchannels,
			 const void *member);

/* The slot of (community, channel), "" for the community-wide one; NULL
 * when nothing is registered there. */
struct hub_slot *hub_registry_find(const struct hub_registry *r,
				   int64_t community, const char *channel);

/* Calls fn(member, ctx) for every registration of every slot of
 * community (0: of every community); a member registered for several
 * channels is met once per slot. */
void hub_registry_each(const struct hub_registry *r, int64_t community,
		       void (*fn)(void *member, void *ctx), void *ctx);

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
