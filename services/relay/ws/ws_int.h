/*
 * What the files of ws/ call of each other: the message dispatch
 * (ws_message.c) hands each connection's messages on, and ws.c hands it
 * every complete text message.
 *
 * ws_req.c, NIP-01 REQ and CLOSE on a WebSocket connection (PROTOCOL.md
 * section 7): a plain REQ sends the stored events its filters match (the
 * same readable set as POST /query), EOSE, then every new matching event
 * its reader may read at the moment it is delivered. A REQ whose only
 * filter is an artifact `current` filter with `#h` is a sync and goes to
 * ws_sync_open() (sync/).
 */
#ifndef COMB_WS_INT_H
#define COMB_WS_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "comb/event.h"
#include "proto/proto.h"
#include "session/session.h"


/* Handles ["REQ", id, filter...] (msg borrowed). */
void ws_req_open(struct ws_session *s, const json_t *msg);

/* Handles ["CLOSE", id]: the subscription stops at once, silently. */
void ws_req_close(struct ws_session *s, const json_t *msg);

/* Handles one complete text message (len bytes, not NUL-terminated) of
 * session s, whose client's address is addr (what its writes count
 * against): EVENT, REQ, CLOSE or AUTH (ws_message.c). */
void ws_session_handle(struct ws_session *s, const char *addr, const char *msg,
		       size_t len);

#endif
