/*
 * ws/: the WebSocket side of the relay. ws.c is the transport on civetweb
 * (PROTOCOL.md sections 1 and 7): upgrade admission by Host (an unknown
 * host gets HTTP 404 {"error":"unknown community"} and no upgrade), the
 * connection caps (per node and per client address), the connection's
 * lifecycle, frame reassembly, close frames, and the timeout of
 * unauthenticated connections. The NIP-01 messages themselves are
 * ws_message.c's (AUTH, EVENT) and ws_req.c's (plain REQ subscriptions,
 * CLOSE); syncs are handed to sync/. The only public header of the folder.
 *
 * civetweb runs each connection on one worker thread of its own, which
 * calls these callbacks in order: begin_request, connect, ready, data
 * (once per frame), close, end_request. It answers pings itself and sends
 * a ping after every WS_PING_INTERVAL_MS without traffic
 * (enable_websocket_ping_pong, websocket_timeout_ms), closing connections
 * whose pings go unanswered. With comb's patch it also closes a
 * connection whose message exceeds max_message_length (close code 1009,
 * from the frame header, before buffering it) or arrives slower than
 * WS_MESSAGE_TIMEOUT_MS (1008).
 */
#ifndef COMB_WS_H
#define COMB_WS_H

#include <civetweb.h>
#include <stddef.h>

#include "relay.h"

/* Keepalive: civetweb pings a connection silent for this long. */
#define WS_PING_INTERVAL_MS 15000
#define WS_PING_INTERVAL_TEXT "15000"
/* A message must arrive whole within this time of its first byte. */
#define WS_MESSAGE_TIMEOUT_TEXT "10000"

/*
 * The civetweb begin_request callback (main.c installs it): for a
 * WebSocket upgrade, refuses paths other than "/" and unknown hosts (404),
 * and upgrades beyond the node's or the client address's connection limit
 * (503), answering in the JSON error shape; an admitted upgrade holds a
 * connection slot until ws_end_request. Returns 0 to let civetweb go on,
 * else the status sent. Other requests pass untouched.
 */
int ws_begin_request(struct mg_connection *conn);

/* True when conn's request asks for a WebSocket upgrade. */
bool ws_is_upgrade(const struct mg_connection *conn);

/* The civetweb end_request callback (main.c installs it): gives back the
 * slot of an upgrade admitted on this thread. */
void ws_end_request(const struct mg_connection *conn, int status);

/*
 * Starts live delivery and the idle-timeout thread, and sizes the
 * connection limits: at most num_threads minus a reserve (an eighth, at
 * least 2) WebSockets, so HTTP always has worker threads, and at most
 * max_connections_per_ip of them from one client address. Call before
 * ws_register. Returns 0 or a negative COMB_E* with errbuf set.
 */
int ws_start(struct relay *relay, char *errbuf, size_t errlen);

/* Registers the WebSocket handlers on "/" of ctx (relay borrowed). */
void ws_register(struct mg_context *ctx, struct relay *relay);

/* Stops what ws_start started; call after mg_stop (every connection is
 * closed by then). */
void ws_stop(void);

/*
 * Graceful shutdown, after relay->draining was set (new upgrades are then
 * refused with 503): sends every connection the close 1001 "going away"
 * (a connection handling a message gets it once the message is answered,
 * so that a write in progress is acknowledged), shuts down the sockets of
 * clients that do not answer the close within 2 s, and waits up to
 * timeout_ms for every connection to end. Returns the connections left.
 */
int ws_drain(int timeout_ms);

/* WebSocket connections open now. */
int ws_connections(void);

#endif
