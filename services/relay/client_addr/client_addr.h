/*
 * The client address (PROTOCOL.md section 10) and the per-address caps
 * of plain connections and HTTP requests. The client address of a
 * request is its TCP peer, or, only when the peer is one of the operator's
 * trusted proxies (COMB_TRUSTED_PROXIES), the last X-Forwarded-For entry
 * that is not a trusted proxy (comb/netaddr.h). Every per-address limit
 * applies to it: WebSocket connections (ws/ws.c), HTTP requests in
 * progress (here) and writes in flight (write/batch.c).
 *
 * Before its headers are read, a connection only has its peer: a peer
 * that is not a trusted proxy may hold at most COMB_MAX_CONNECTIONS_PER_IP
 * + COMB_MAX_HTTP_CONNECTIONS_PER_IP connections, each of which must send
 * its request line and headers within COMB_HEADER_DEADLINE_TEXT ms (main.c
 * sets civetweb's request_header_timeout_ms), so that slow headers from
 * one address cannot hold the node's worker threads. A trusted proxy
 * reads the headers itself before it forwards them.
 */
#ifndef COMB_CLIENT_ADDR_H
#define COMB_CLIENT_ADDR_H

#include <civetweb.h>
#include <stdbool.h>
#include <stddef.h>

#include "addr_counts.h"
#include "comb/netaddr.h"
#include "relay.h"

/* Parses COMB_TRUSTED_PROXIES and sets the tables up; call before the
 * server starts. Returns 0, or a negative COMB_E* with errbuf set. */
int client_addr_start(struct relay *relay, char *errbuf, size_t errlen);

/* Writes conn's client address (COMB_NETADDR_TEXT bytes) into out; its
 * headers must have been read. */
void client_addr_of(const struct mg_connection *conn, char *out, size_t outlen);

/*
 * civetweb's init_connection callback: counts the connection against its
 * peer (unless the peer is a trusted proxy). Over the cap it writes 503
 * `{"error":"error: too many connections"}` and returns 1, and civetweb
 * closes the connection without reading from it (comb's patch); else 0.
 * Every connection it saw is given back by client_addr_connection_close.
 */
int client_addr_connection_open(const struct mg_connection *conn, void **conn_data);

/* civetweb's connection_close callback. */
void client_addr_connection_close(const struct mg_connection *conn);

/*
 * Claims one of the HTTP requests in progress the request's client address
 * may have (COMB_MAX_HTTP_CONNECTIONS_PER_IP), for this worker thread until
 * client_addr_request_end. Returns true, or answers 503 `{"error":"error:
 * too many connections"}` and returns false.
 */
bool client_addr_request_begin(struct mg_connection *conn);

/* Gives back what client_addr_request_begin claimed on this thread (a
 * no-op when it claimed nothing). */
void client_addr_request_end(void);

#endif
