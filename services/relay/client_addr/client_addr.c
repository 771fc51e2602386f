/*
 * Client addresses and the per-address caps of connections and HTTP
 * requests (client_addr.h).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "addr_counts.h"
#include "client_addr.h"
#include "comb/error.h"
#include "comb/log.h"

/* X-Forwarded-For headers read per request; more are ignored (the last
 * ones, which a trusted proxy appended, are the ones that count). */
#define MAX_FORWARDED 8

static struct {
	struct comb_netranges trusted;
	struct addr_counts connections;  /* per untrusted peer */
	struct addr_counts requests;     /* per client address */
	int connection_cap;
	int request_cap;
} ca;

/* What client_addr_request_begin claimed on this thread. */
static _Thread_local struct {
	bool claimed;
	char addr[COMB_NETADDR_TEXT];
} held;

int client_addr_start(struct relay *relay, char *errbuf, size_t errlen)
{
	const struct comb_config *cfg = &relay->cfg;
	char err[160];
	int rc;

	rc = comb_netranges_parse(cfg->trusted_proxies, &ca.trusted, err, sizeof(err));
	if (rc)
		return comb_fail(errbuf, errlen, rc, "COMB_TRUSTED_PROXIES: %s", err);
	/* each connection a worker serves holds at most one entry of each */
	if (addr_counts_init(&ca.connections, cfg->num_threads) ||
	    addr_counts_init(&ca.requests, cfg->num_threads))
		return comb_fail(errbuf, errlen, COMB_ENOMEM, "out of memory");
	ca.connection_cap = cfg->max_connections_per_ip + cfg->max_http_connections_per_ip;
	ca.request_cap = cfg->max_http_connections_per_ip;
	if (ca.trusted.n)
		comb_info("client addresses: X-Forwarded-For trusted from %zu proxy address ranges (COMB_TRUSTED_PROXIES)",
			  ca.trusted.n);
	return 0;
}

void client_addr_of(const struct mg_connection *conn, char *out, size_t outlen)
{
	const struct mg_request_info *info = mg_get_request_info(conn);
	const char *xff[MAX_FORWARDED];
	size_t n = 0;
	int i;

	for (i = 0; i < info->num_headers; i++) {
		if (strcasecmp(info->http_headers[i].name, "X-Forwarded-For"))
			continue;
		if (n == MAX_FORWARDED)
			memmove(xff, xff + 1, sizeof(xff[0]) * --n);
		xff[n++] = info->http_headers[i].value;
	}
	comb_client_address(&ca.trusted, info->remote_addr, xff, n, out, outlen);
}

/* True when the connection's peer is a trusted proxy. */
static bool peer_trusted(const struct mg_connection *conn)
{
	const char *peer = mg_get_request_info(conn)->remote_addr;
	struct comb_netaddr a;

	return comb_netaddr_parse(peer, strlen(peer), &a) == 0 &&
	       comb_netranges_contains(&ca.trusted, &a);
}

/* The answer to a client address over a cap, sent as it stands: the
 * connection is closed after it. */
static const char too_many[] =
	"HTTP/1.1 503 Service Unavailable\r\n"
	"Content-Type: application/json\r\n"
	"Content-Length: 39\r\n"
	"Retry-After: 2\r\n"
	"Access-Control-Allow-Origin: *\r\n"
	"Connection: close\r\n\r\n"
	"{\"error\":\"error: too many connections\"}";

int client_addr_connection_open(const struct mg_connection *conn, void **conn_data)
{
	const char *peer = mg_get_request_info(conn)->remote_addr;

	(void)conn_data;
	if (peer_trusted(conn))
		return 0;
	/* counted even when refused: connection_close gives it back */
	if (addr_counts_add(&ca.connections, peer) <= ca.connection_cap)
		return 0;
	/* civetweb hands the callback a const connection it may write to */
	mg_write((struct mg_connection *)conn, too_many, sizeof(too_many) - 1);
	return 1;
}

void client_addr_connection_close(const struct mg_connection *conn)
{
	if (!peer_trusted(conn))
		addr_counts_release(&ca.connections, mg_get_request_info(conn)->remote_addr);
}

bool client_addr_request_begin(struct mg_connection *conn)
{
	char addr[COMB_NETADDR_TEXT];

	client_addr_of(conn, addr, sizeof(addr));
	if (!addr_counts_claim(&ca.requests, addr, ca.request_cap)) {
		mg_close_after_response(conn);
		mg_write(conn, too_many, sizeof(too_many) - 1);
		return false;
	}
	held.claimed = true;
	snprintf(held.addr, sizeof(held.addr), "%s", addr);
	return true;
}

void client_addr_request_end(void)
{
	if (held.claimed)
		addr_counts_release(&ca.requests, held.addr);
	held.claimed = false;
}
