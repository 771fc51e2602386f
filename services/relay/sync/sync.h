/*
 * Artifact sync over WebSocket (PROTOCOL.md section 7, docs/protocol.md
 * "Sync"): a REQ whose only filter is {"artifact":"current", "#h":[...]}
 * with optionally #type, #d and kinds [45010]. The relay registers the
 * sync for its channels' signals, waits until the capture feed of the
 * community is trusted, reads the whole set from one REPEATABLE READ
 * snapshot and sends it ordered by d, then EOSE, then every change: the
 * current revision when it is newer than what the client holds (a delete
 * revision too), a `redacted` marker for a redacted current revision, the
 * `moved` marker when an artifact leaves the synced channels. When it
 * cannot stay exact it closes the sync with a `resync:` reason.
 *
 * ws_req.c calls ws_sync_open on the connection's thread; the capture feed
 * calls ws_sync_signal and ws_sync_interrupt on its own thread; a small
 * pool of workers (ws_sync_apply.c) re-reads changed artifacts and pushes
 * frames without ever waiting on a client.
 */
#ifndef COMB_WS_SYNC_H
#define COMB_WS_SYNC_H

#include <jansson.h>

#include "comb/signal.h"
#include "ws_session.h"

/* Worker threads that apply changes to open syncs. */
#define WS_SYNC_WORKERS 2

/*
 * Starts the workers (relay borrowed for its database pool, policy and
 * configuration). Returns 0, or COMB_EIO with errbuf set.
 */
int ws_sync_start(struct relay *relay, char *errbuf, size_t errlen);

/* Stops the workers. Every sync must have been released before (all
 * connections closed). Safe when ws_sync_start failed or never ran. */
void ws_sync_stop(void);

/*
 * Opens sync sub_id for filter (borrowed) on session s, whose reader is
 * authenticated and under its subscription limit (checked by the caller;
 * a subscription with the same id was closed already). Answers on its
 * own, on the calling connection thread: the snapshot and EOSE, or
 * CLOSED `invalid: ...` (limit, offset, other predicates, a set larger
 * than COMB_SYNC_MAX_EVENTS), `restricted: not a channel member` (no
 * EOSE), `error: ...` (the change feed or the database is unavailable).
 */
void ws_sync_open(struct ws_session *s, const char *sub_id,
		  const json_t *filter);

/*
 * Hands a signal (borrowed) from the capture feed to the syncs it
 * concerns: head, move and redaction signals to the syncs covering the
 * channel, member signals to that reader's syncs on the channel, channel
 * signals to every sync covering it; other types are ignored. Only
 * queues; never blocks on a client or the database.
 */
void ws_sync_signal(const struct comb_signal *s);

/*
 * Closes every sync of community_id (0: of every community) that is past
 * its trust check with CLOSED reason (`resync: change feed interrupted`).
 */
void ws_sync_interrupt(int64_t community_id, const char *reason);

#endif
