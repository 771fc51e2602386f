/*
 * What the files of feed/ call of each other: the feed thread (feed.c)
 * queues event signals for live delivery (live.c) and switches the local
 * feed (local.c), which queues the events written through this node.
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
 * Queues signal s (borrowed; copied) for live delivery (live.c): stored
 * events (event), artifact revisions (head), moved and redacted markers
 * (move, redaction) are loaded from the database, ephemeral events taken
 * from the payload, and delivered in the order they were queued, their
 * recipients' access checked where the signal's position has been
 * replayed. Signals nobody on this node listens to are dropped at once.
 * The feed thread; never waits.
 */
void feed_live_push(const struct comb_signal *s);

/*
 * Queues one event written through this node (json copied: the event as
 * it should be served) of community_id in channel (canonical uuid; NULL
 * for an event without a channel) for live delivery (live.c), its
 * recipients' access checked on the primary. Returns 0; COMB_ETOOBIG when
 * the backlog is full (the event is dropped and every live subscription
 * interrupted); COMB_ENOMEM; COMB_EIO when live delivery does not run.
 */
int feed_live_push_local(int64_t community_id, const char *channel,
			 const char *json, size_t len);

/*
 * Decides whether events written through this node feed live delivery
 * directly (local.c; on by default). Turn it off once the capture feed
 * delivers every event, so that none arrives twice.
 */
void feed_local_set(bool on);

#endif
