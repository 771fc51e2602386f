/*
 * sync/: artifact sync over WebSocket (PROTOCOL.md section 7, docs/protocol.md
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
 * ws/ws_req.c calls ws_sync_open on the connection's thread; ws_sync_start
 * registers a listener with the capture feed (feed/), which calls it on
 * the feed's thread; a small pool of workers (apply.c) re-reads
 * changed artifacts and pushes frames without ever waiting on a client.
 * The held changes and the uuid map are sync_int.h's. The only public
 * header of the folder.
 */
#ifndef COMB_SYNC_H
#define COMB_SYNC_H

#include <jansson.h>

#include "session/session.h"

/* Worker threads that apply changes to open syncs. */
#define WS_SYNC_WORKERS 2

/*
 * Starts the workers (relay borrowed for its database pool, policy and
 * configuration) and registers the syncs with the capture feed; call
 * before feed_start. Returns 0, or COMB_EIO with errbuf set.
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
 * Resumable sync (resume.c, PROTOCOL.md section 7.1): a REQ whose only
 * filter is {"artifact":"changes"} with optionally #h, #type and an
 * incremental cursor. ws_resume_start registers it with the capture feed
 * and starts its workers (call before feed_start; 0, or COMB_EIO with
 * errbuf set); ws_resume_stop stops them once every connection is
 * closed, and is safe when ws_resume_start failed or never ran.
 */
int ws_resume_start(struct relay *relay, char *errbuf, size_t errlen);
void ws_resume_stop(void);

/*
 * Opens resumable sync sub_id for filter (borrowed) on session s, under
 * the same conditions as ws_sync_open. Answers on its own, on the calling
 * connection thread: the catch-up as CHANGES frames and EOSE, or CLOSED
 * (`invalid: ...`, `incremental_bad_cursor: ...`, `incremental_reset:
 * ...`, `incremental_busy: ...`, `error: incremental_unavailable` while
 * incremental reads are off, `error: ...`); afterwards CHANGES frames
 * from its workers until it is closed.
 */
void ws_resume_open(struct ws_session *s, const char *sub_id,
		    const json_t *filter);

#endif
