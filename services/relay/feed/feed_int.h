/*
 * What the files of feed/ call of each other: the feed thread (feed.c)
 * hands event signals to the loader (loader.c), which hands events to
 * the live dispatcher (live.c); the feed also switches the local feed.
 */
#ifndef COMB_FEED_INT_H
#define COMB_FEED_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/signal.h"
#include "feed.h"
#include "relay.h"

/*
 * Queues one event (json copied: the event as it should be served) of
 * community_id in channel (canonical uuid; NULL for an event without a
 * channel) for live delivery. kind is the event's kind; its recipients'
 * access is checked on a server that has replayed position at
 * (COMB_READ_PRIMARY: the primary). Returns 0;
 * COMB_ETOOBIG when the backlog is full (the event is dropped and every
 * live subscription interrupted); COMB_ENOMEM; COMB_EIO when the
 * dispatcher does not run.
 */
int ws_live_deliver_event(int64_t community_id, const char *channel,
			  const char *json, size_t len, int kind, comb_lsn at);

/*
 * Decides whether events written through this node feed live delivery
 * directly (on by default). Turn it off once the capture feed delivers
 * every event, so that none arrives twice.
 */
void ws_live_set_local_feed(bool on);

/* loader.c: the loader that turns event signals into live events. */

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
