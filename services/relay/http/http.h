/*
 * The HTTP side of the relay: the civetweb request callback that routes
 * each request, resolves its community, enforces the body limit (413
 * before parsing) and NIP-98 on every POST, hands it to the route's
 * handler (write/ for POST /events, read/ for /query and /count, this
 * folder for NIP-11, health and metrics) and records metrics.
 */
#ifndef COMB_HTTP_H
#define COMB_HTTP_H

#include <civetweb.h>

/* The civetweb request handler for every path; cbdata is the struct relay
 * (borrowed). Returns the status sent. */
int http_handler(struct mg_connection *conn, void *cbdata);

#endif
