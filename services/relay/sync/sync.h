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
 * ws/ws_req.c calls ws_sync_open on the connection's thread. Each sync
 * registers with the hub (hub/), which hands it the capture feed's
 * signals on the feed's thread and gives it turns on its workers: a
 * `current` sync's turn (apply.c) re-reads changed artifacts and pushes
 * frames without ever waiting on a client, a resumable sync's (resume.c)
 * reads again from its cursor. The held changes and the uuid map are
 * sync_int.h's. The only public header of the folder.
 */
#ifndef COMB_SYNC_H
#define COMB_SYNC_H

#include <jansson.h>

#include "hub/hub.h"
#include "session/session.h"

/* The kinds of subscription of this folder, for hub_workers_start. */
#define SYNC_KINDS 2
extern const struct hub_kind *const sync_kinds[SYNC_KINDS];

/*
 * Prepares syncs of both kinds (relay borrowed: the resumable syncs'
 * cursor key, resume.c); call before the hub's workers start. Returns 0,
 * or COMB_EIO with errbuf set.
 */
int ws_sync_start(struct relay *relay, char *errbuf, size_t errlen);

/* Forgets what ws_sync_start prepared, once every connection is closed
 * and the hub's workers stopped. Safe when it failed or never ran. */
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
 * incremental cursor.
 */
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
