/*
 * feed/: the capture feed, this relay node's subscriber to comb-capture's
 * signals (docs/operations.md, "Change capture"; comb/signal.h for the
 * wire form).
 *
 * One thread holds a ZeroMQ SUB socket connected to every endpoint of
 * COMB_CAPTURE_ENDPOINT. It subscribes to the liveness heartbeat and, for
 * each community that has WebSocket connections on this node, to that
 * community's topics. Per community it keeps the epoch's last sequence
 * number and whether the feed is trusted (from the first mark, or the
 * signal with seq 1, of the current epoch). A sequence gap, a new epoch
 * or three missed heartbeats interrupt the syncs and live subscriptions
 * of the affected communities (`resync: change feed interrupted`).
 *
 * Signals are handed on without database work on this thread: every
 * signal to the listener registered with feed_listen() (the hub, hub/,
 * which hands them to the syncs of sync/), stored and ephemeral events to
 * the live delivery thread of plain subscriptions (live.c), which loads
 * each stored event's JSON and delivers it.
 *
 * feed/ is below every part that reads or writes: they register here and
 * are called back, the feed never names them. The only public header of
 * the folder.
 */
#ifndef COMB_FEED_H
#define COMB_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access/access.h"
#include "comb/event.h"
#include "comb/policy_set.h"
#include "comb/signal.h"
#include "relay.h"

/* Heartbeat intervals without a heartbeat after which the feed is down. */
#define FEED_MISSED_HEARTBEATS 3

/*
 * The subscriber to the capture signals beside the live registry (the
 * hub). Both callbacks run on the feed thread and must only queue: never
 * block on a client or the database.
 */
struct feed_listener {
	/* Hands over one signal (borrowed) of a watched community. */
	void (*signal)(const struct comb_signal *s);
	/* Changes of community_id (0: of every community) were lost (a gap,
	 * a new epoch, a lost link); reason starts with `resync:`. */
	void (*interrupt)(int64_t community_id, const char *reason);
};

/*
 * Makes l (borrowed; it must stay valid until feed_stop returns) the
 * listener of every signal and interruption from now on. Call before
 * feed_start, on the starting thread.
 */
void feed_listen(const struct feed_listener *l);

/*
 * Starts the feed thread for relay (borrowed; its
 * configuration names the endpoints and the heartbeat interval). Call
 * after feed_live_start and after feed_listen. Returns 0,
 * or COMB_EIO / COMB_ENOMEM with errbuf set.
 */
int feed_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the feed thread. Safe when feed_start failed or never ran. */
void feed_stop(void);

/*
 * Makes sure the feed subscribes to community_id's topics (lazily, once;
 * subscriptions are never dropped). Cheap after the first call for a
 * community; any thread.
 */
void feed_watch(int64_t community_id);

/* True while a liveness heartbeat arrived within the last
 * FEED_MISSED_HEARTBEATS intervals. Any thread. */
bool feed_alive(void);

/* The CLOSED reason of a subscription whose feed was interrupted. */
#define FEED_INTERRUPTED "resync: change feed interrupted"

/*
 * Waits up to timeout_ms until the feed of community_id is trusted, and
 * stores the community's interruption generation in *generation. Returns
 * 0, or COMB_EUNAVAIL when the feed did not become trusted in time.
 *
 * A subscriber that must not miss a change registers for its signals
 * first, then calls this, then reads its snapshot, and finally checks
 * feed_still_trusted() with the generation: every change committed after
 * the snapshot began then reaches it as a signal, or it is interrupted.
 */
int feed_wait_trusted(int64_t community_id, int timeout_ms,
		      uint64_t *generation);

/* How long a new subscription waits for a trusted feed: one heartbeat
 * longer than capture may stay silent before it counts as dead. */
int feed_trust_wait_ms(const struct comb_config *cfg);

/* True when community_id is trusted and was not interrupted since
 * feed_wait_trusted() gave generation. */
bool feed_still_trusted(int64_t community_id, uint64_t generation);

/*
 * live.c, live delivery: the thread that hands each new event to the
 * subscriptions that want it (plain REQs, registered with the hub, hub/,
 * whose kind takes events) and whose reader may read it now.
 *
 * Access is decided per recipient at delivery, from the database's facts
 * about the event's channel and the recipient's role in it, as a server
 * that has replayed the event has them, against the read keys the policy
 * plugins gave that recipient (access.h); events without a channel go
 * only to their author.
 *
 * Events arrive in one queue, which the thread keeps in order: from the
 * capture feed (feed.c), which carries what every relay node wrote, and,
 * while the feed is down or was never up, from the local write path after
 * commit (feed_local_*, called by write/; local.c).
 */

/* Items queued for live delivery beyond which new ones are dropped: a
 * signal's community is interrupted, a local event interrupts every live
 * subscription. */
#define FEED_LIVE_MAX_BACKLOG 65536

/*
 * Starts the live delivery thread (relay borrowed for its database pools,
 * revision cache and configuration). Returns 0, or COMB_EIO with errbuf
 * set.
 */
int feed_live_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the live delivery thread and drops what is queued. Every
 * subscription must have been removed (all connections closed) before. */
void feed_live_stop(void);

/*
 * The local feed, called by the write path (write/) on the writing
 * thread: begin before a write, stored for every event the write inserted
 * (channel NULL for none), end after it with accepted true when it
 * committed. On accept the stored events (and ev itself when it is
 * ephemeral, kinds 20000-29999, delivered to its `h` channel) are queued
 * for delivery; otherwise they are forgotten. Cheap when nobody listens.
 */
void feed_local_begin(void);
void feed_local_stored(const struct community *c,
		       const struct comb_event *ev, const char *channel);
void feed_local_end(const struct community *c, const struct comb_event *ev,
		    bool accepted);

/*
 * For writes that commit later than they end (the write path's group
 * commit): take returns what end would deliver (NULL for nothing) and
 * forgets it on this thread; deliver queues it for delivery when committed
 * is true, and frees it either way. end(c, ev, accepted) is
 * deliver(take(c, ev, accepted), true).
 */
struct feed_local;
struct feed_local *feed_local_take(const struct community *c,
				   const struct comb_event *ev,
				   bool accepted);
void feed_local_deliver(struct feed_local *taken, bool committed);

#endif
