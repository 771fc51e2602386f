/*
 * The capture feed: this relay node's subscriber to comb-capture's signals
 * (docs/operations.md, "Change capture"; comb/signal.h for the wire form).
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
 * Signals are handed on without database work on this thread: artifact,
 * membership and channel signals to the syncs (ws_sync.h), stored and
 * ephemeral events to live plain subscriptions through a loader thread
 * that fetches each stored event's JSON (feed_live.c) and then ws_live.
 */
#ifndef COMB_FEED_H
#define COMB_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/signal.h"
#include "relay.h"

/* Heartbeat intervals without a heartbeat after which the feed is down. */
#define FEED_MISSED_HEARTBEATS 3

/*
 * Starts the feed thread and the live loader for relay (borrowed; its
 * configuration names the endpoints and the heartbeat interval). Call
 * after ws_start and ws_sync_start, whose registries it feeds. Returns 0,
 * or COMB_EIO / COMB_ENOMEM with errbuf set.
 */
int feed_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops both threads. Safe when feed_start failed or never ran. */
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

/* True when community_id is trusted and was not interrupted since
 * feed_wait_trusted() gave generation. */
bool feed_still_trusted(int64_t community_id, uint64_t generation);

/* feed_live.c: the loader that turns event signals into live events. */

/* Starts the loader thread. Returns 0 or COMB_EIO with errbuf set. */
int feed_live_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the loader and drops what it still holds. */
void feed_live_stop(void);

/*
 * Queues signal s (borrowed; copied) for live delivery: stored events
 * (event), artifact revisions (head), moved and redacted markers (move,
 * redaction) are loaded from the database and ephemeral events taken from
 * the payload, then handed to ws_live in the order they were queued.
 * Signals nobody on this node listens to are dropped at once.
 */
void feed_live_push(const struct comb_signal *s);

#endif
