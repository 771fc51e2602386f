/*
 * Artifact sync over WebSocket (PROTOCOL.md section 7): a REQ whose only
 * filter is {"artifact":"current", "#h":[...], ...}. This is the single
 * entry point ws_req.c calls; the sync itself (live registration on the
 * channels' signals, one snapshot ordered by d, EOSE, held changes,
 * `resync:` closes) is not implemented yet.
 */
#ifndef COMB_WS_SYNC_H
#define COMB_WS_SYNC_H

#include <jansson.h>

#include "ws_session.h"

/*
 * Opens sync sub_id for filter (borrowed) on session s, whose reader is
 * authenticated and under its subscription limit (checked by the caller;
 * a subscription with the same id was closed already). Answers on its
 * own: for now always ["CLOSED",sub_id,"invalid: sync not available yet"].
 * An implementation embeds struct ws_sub (ws_session.h) first in its
 * subscription and adds it with ws_session_add_sub(), so that CLOSE,
 * replacement and the subscription limit treat it like a plain REQ, and
 * pushes live frames without WS_PUSH_WAIT (a full outbox means
 * `resync: slow consumer`).
 */
void ws_sync_open(struct ws_session *s, const char *sub_id,
		  const json_t *filter);

#endif
