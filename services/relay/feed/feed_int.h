/*
 * Live delivery: the registry of WebSocket subscriptions waiting for new
 * events, and the dispatcher thread that hands each new event to the
 * subscriptions that want it and whose reader may read it now.
 *
 * Interest is registered per (community, channel): an entry names the
 * channels it covers, or none to cover every channel of its community.
 * Access is decided per recipient at delivery, from the database's current
 * facts about the event's channel and the recipient's role in it, against
 * the read keys the policy plugins gave that recipient (access.h); events
 * without a channel go only to their author.
 *
 * Events arrive through ws_live_deliver_event(), which only queues: from
 * the capture feed (feed.h), which carries what every relay node wrote,
 * and, while the feed is down or was never up, from the local write path
 * after commit (ws_live_local_*, called by events.c). The dispatcher keeps
 * their order.
 */
#ifndef COMB_WS_LIVE_H
#define COMB_WS_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comb/event.h"
#include "comb/policy_set.h"
#include "relay.h"

/* Bytes of a read-key bitmap: bit k set when read key k is readable. */
#define WS_LIVE_KEY_BYTES (COMB_POLICY_READ_KEYS / 8)
/* Events queued for the dispatcher beyond which new ones are dropped and
 * every live subscription is interrupted. */
#define WS_LIVE_MAX_BACKLOG 65536

/* One event being delivered; everything borrowed for the call. */
struct ws_live_event {
	int64_t community_id;
	const char *channel;           /* canonical uuid, or NULL for none */
	const struct comb_event *ev;   /* parsed */
	const char *json;              /* the event as served */
	size_t json_len;
};

struct ws_live_entry;

/* Called under the registry's read lock; must not block or take locks
 * that a thread calling ws_live_add/remove may hold. */
typedef bool (*ws_live_match_fn)(struct ws_live_entry *e,
				 const struct ws_live_event *ev, bool *named);
typedef void (*ws_live_deliver_fn)(struct ws_live_entry *e,
				   const struct ws_live_event *ev);
typedef void (*ws_live_interrupt_fn)(struct ws_live_entry *e,
				     const char *reason);

/*
 * A registered interest. The owner fills the public part before
 * ws_live_add and keeps it unchanged (and alive) until ws_live_remove
 * returns.
 */
struct ws_live_entry {
	int64_t community_id;
	const char (*channels)[37];  /* borrowed; the channels covered */
	size_t nchannels;            /* 0: every channel of the community */
	const char *reader;          /* borrowed pubkey hex of the recipient */
	const uint8_t *read_keys;    /* borrowed bitmap, WS_LIVE_KEY_BYTES */
	/* True when the entry wants ev; *named tells whether the filter that
	 * matched names the event's channel (it counts for unlisted ones). */
	ws_live_match_fn match;
	/* Hands over an event the reader may read. Must not block: push
	 * without WS_PUSH_WAIT and close the subscription when it is full. */
	ws_live_deliver_fn deliver;
	/* Tells the entry that events were lost (dispatcher overflow, access
	 * could not be checked); reason starts with `resync:` or `error:`. */
	ws_live_interrupt_fn interrupt;
	bool registered;             /* internal */
};

/*
 * Starts the dispatcher thread (relay borrowed for its database pool and
 * policy). Returns 0, or COMB_EIO / COMB_ENOMEM with errbuf set.
 */
int ws_live_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the dispatcher and drops queued events. Every entry must have been
 * removed (all connections closed) before. */
void ws_live_stop(void);

/* Registers e. Returns 0 or COMB_ENOMEM (nothing registered then). */
int ws_live_add(struct ws_live_entry *e);

/* Unregisters e (nothing when it is not registered). When this returns no
 * delivery to e is in progress and none will start. */
void ws_live_remove(struct ws_live_entry *e);

/*
 * Queues one event (json copied: the event as it should be served) of
 * community_id in channel (canonical uuid; NULL for an event without a
 * channel) for live delivery. kind is the event's kind. Returns 0;
 * COMB_ETOOBIG when the backlog is full (the event is dropped and every
 * live subscription interrupted); COMB_ENOMEM; COMB_EIO when the
 * dispatcher does not run.
 */
int ws_live_deliver_event(int64_t community_id, const char *channel,
			  const char *json, size_t len, int kind);

/*
 * Decides whether events written through this node feed live delivery
 * directly (on by default). Turn it off once the capture feed delivers
 * every event, so that none arrives twice.
 */
void ws_live_set_local_feed(bool on);

/*
 * The local feed, called by the write path (events.c) on the writing
 * thread: begin before a write, stored for every event the write inserted
 * (channel NULL for none), end after it with accepted true when it
 * committed. On accept the stored events (and ev itself when it is
 * ephemeral, kinds 20000-29999, delivered to its `h` channel) are queued
 * for delivery; otherwise they are forgotten. Cheap when nobody listens.
 */
void ws_live_local_begin(void);
void ws_live_local_stored(const struct community *c,
			  const struct comb_event *ev, const char *channel);
void ws_live_local_end(const struct community *c, const struct comb_event *ev,
		       bool accepted);

/* Subscriptions registered now (for metrics and tests). */
long ws_live_entries(void);

/*
 * True when a subscription may want events of community_id in channel
 * (NULL for none): some entry covers the channel or the whole community.
 * Errs towards true when the registry is busy. Lets the capture feed skip
 * loading events nobody on this node listens to. Any thread.
 */
bool ws_live_wanted(int64_t community_id, const char *channel);

/*
 * Tells every entry of community_id (0: of every community) that events
 * were lost, through its interrupt callback with reason (`resync: ...` or
 * `error: ...`). Used by the capture feed on a gap, a new epoch or a lost
 * link. Any thread that holds no session lock.
 */
void ws_live_interrupt(int64_t community_id, const char *reason);

#endif
