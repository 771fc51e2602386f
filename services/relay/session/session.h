/*
 * One WebSocket connection's protocol state (PROTOCOL.md section 7): its
 * community, the NIP-42 challenge and the authenticated pubkey with its
 * read keys, the open subscriptions, and the outbound queue every answer
 * goes through. Parses complete NIP-01 messages (EVENT, REQ, CLOSE, AUTH)
 * and answers them; knows nothing of civetweb (ws.c is the transport).
 *
 * Threads: the connection's own thread calls everything here; the live
 * dispatcher (and later the sync code) only pushes to the outbox and
 * changes a subscription's delivery state under `mu`.
 */
#ifndef COMB_WS_SESSION_H
#define COMB_WS_SESSION_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "relay.h"
#include "ws_live.h"
#include "ws_outbox.h"

/* The longest subscription id accepted (NIP-01 suggests 64). */
#define WS_SUB_ID_MAX 64
/* Seconds a connection may stay unauthenticated. */
#define WS_AUTH_TIMEOUT_S 30

struct ws_session;

/*
 * What every kind of subscription (plain REQ, sync) has in common, so the
 * session can count, find, replace and close them alike. A subscription
 * type embeds it as its first member.
 */
struct ws_sub {
	struct ws_sub *next;
	char id[WS_SUB_ID_MAX + 1];
	/* Set under the session's mu once the subscription was closed by the
	 * relay (CLOSED sent or about to be); dead ones are released at the
	 * next message and no longer count. */
	bool dead;
	/* Unregisters from everything that may still deliver to it and frees
	 * it. Called on the connection's thread, never under mu. */
	void (*release)(struct ws_session *s, struct ws_sub *sub);
};

struct ws_session {
	struct relay *relay;             /* borrowed */
	struct ws_outbox *outbox;        /* owned */
	struct community community;
	char host_header[264];           /* as sent: the NIP-42 relay tag names it */
	char challenge[65];
	struct timespec connected_at;    /* CLOCK_MONOTONIC */

	pthread_mutex_t mu;              /* guards authenticated, dead flags
	                                    and subscription delivery state */
	bool authenticated;
	char pubkey[65];                 /* constant once authenticated */
	uint8_t read_keys[WS_LIVE_KEY_BYTES];

	struct ws_sub *subs;             /* connection thread only */
};

/*
 * Creates a session for a connection of community c whose Host header was
 * host_header (borrowed, copied), writing frames through write(conn,...)
 * (see ws_outbox.h). Returns NULL when out of memory.
 */
struct ws_session *ws_session_new(struct relay *relay,
				  const struct community *c,
				  const char *host_header,
				  ws_outbox_write_fn write, void *conn);

/* Closes every subscription, stops the outbox and frees the session. Call
 * from the connection's thread when the connection is gone. */
void ws_session_free(struct ws_session *s);

/* Sends ["AUTH",<challenge>]. Returns 0 or a negative COMB_E*. */
int ws_session_start(struct ws_session *s);

/* Handles one complete text message (len bytes, not NUL-terminated). */
void ws_session_handle(struct ws_session *s, const char *msg, size_t len);

/* True once NIP-42 authentication succeeded. Any thread. */
bool ws_session_authenticated(struct ws_session *s);

/* Frames. Each builds one NIP-01 message and pushes it with flags (see
 * ws_outbox.h); returns what the push returned. */
int ws_send_notice(struct ws_session *s, const char *message, unsigned flags);
int ws_send_ok(struct ws_session *s, const char *event_id, bool accepted,
	       const char *message, unsigned flags);
int ws_send_closed(struct ws_session *s, const char *sub_id,
		   const char *message, unsigned flags);
int ws_send_eose(struct ws_session *s, const char *sub_id, unsigned flags);
/* ["EVENT",sub_id,<json>] where json (len bytes) is an event as served. */
int ws_send_event(struct ws_session *s, const char *sub_id, const char *json,
		  size_t len, unsigned flags);
/* Builds ["EVENT",sub_id,<json>] into out (caller releases). */
int ws_format_event(struct comb_buf *out, const char *sub_id,
		    const char *json, size_t len);

/* Subscriptions, on the connection's thread. */
struct ws_sub *ws_session_find_sub(struct ws_session *s, const char *id);
void ws_session_add_sub(struct ws_session *s, struct ws_sub *sub);
/* Unlinks sub and releases it. */
void ws_session_drop_sub(struct ws_session *s, struct ws_sub *sub);
/* Releases every dead subscription; returns how many stay open. */
int ws_session_prune(struct ws_session *s);

#endif
