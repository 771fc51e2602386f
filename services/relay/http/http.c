/*
 * The civetweb request callback: routes each request, resolves its
 * community, enforces the body limit (413 before parsing) and NIP-98 on
 * every POST, hands it to the route's handler, and records metrics.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_addr/client_addr.h"
#include "comb/error.h"
#include "comb/netaddr.h"
#include "comb/log.h"
#include "comb/nip98.h"
#include "http.h"
#include "http_int.h"
#include "metrics/metrics.h"
#include "protocol_limits.h"
#include "read/read.h"
#include "relay.h"
#include "request/request.h"
#include "write/write.h"


/* How much earlier than req->start civetweb's body deadline may have
 * started (begin_request runs in between): a read failing within this much
 * of the deadline failed because of it. */
#define BODY_DEADLINE_SLACK_MS 500

static void parse_host(struct request *req)
{
	const char *h = mg_get_header(req->conn, "Host");
	size_t i;

	if (!h)
		h = "";
	snprintf(req->host_header, sizeof(req->host_header), "%s", h);
	for (i = 0; h[i] && h[i] != ':' && i + 1 < sizeof(req->host); i++)
		req->host[i] = (char)tolower((unsigned char)h[i]);
	req->host[i] = '\0';
}

static enum route find_route(const struct mg_request_info *info)
{
	const char *path = info->local_uri ? info->local_uri : "";
	bool get = !strcmp(info->request_method, "GET");
	bool post = !strcmp(info->request_method, "POST");

	if (get && !strcmp(path, "/healthz"))
		return ROUTE_HEALTHZ;
	if (get && !strcmp(path, "/readyz"))
		return ROUTE_READYZ;
	if (get && !strcmp(path, "/metrics"))
		return ROUTE_METRICS;
	if (get && !strcmp(path, "/"))
		return ROUTE_NIP11;
	if (post && !strcmp(path, "/events"))
		return ROUTE_EVENTS;
	if (post && !strcmp(path, "/query"))
		return ROUTE_QUERY;
	if (post && !strcmp(path, "/count"))
		return ROUTE_COUNT;
	return ROUTE_OTHER;
}

/* Reads the body into req->body, no database connection held: answers
 * 413 over the limit, and 408 (closing the connection) when it has not
 * all arrived within COMB_BODY_DEADLINE_MS of the headers. civetweb holds
 * that deadline (request_body_timeout_ms, comb's patch): mg_read returns
 * what has arrived, 0 once the whole body has (Content-Length reached, or
 * a chunked body's last chunk), and -1 past the deadline or on a broken
 * body, which is never passed on (400 and closed when it failed before
 * the deadline: a broken chunked encoding). */
static bool read_body(struct request *req)
{
	size_t max = (size_t)req->relay->cfg.max_message_length;
	long long declared = req->info->content_length;
	struct timespec now;
	struct comb_buf b;
	char chunk[16384];
	int n;

	if (declared > (long long)max) {
		http_send_error(req, 413, "invalid: body too large");
		return false;
	}
	comb_buf_init(&b, max);
	while ((n = mg_read(req->conn, chunk, sizeof(chunk))) > 0) {
		if (comb_buf_append(&b, chunk, (size_t)n)) {
			comb_buf_release(&b);
			http_send_error(req, 413, "invalid: body too large");
			return false;
		}
	}
	if (n < 0 || (declared >= 0 && b.len < (size_t)declared)) {
		comb_buf_release(&b);
		/* civetweb's deadline started just before req->start, at
		 * the end of the headers */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - req->start.tv_sec) * 1000 +
		    (now.tv_nsec - req->start.tv_nsec) / 1000000 <
		    COMB_BODY_DEADLINE_MS - BODY_DEADLINE_SLACK_MS) {
			/* a broken chunked encoding, or the client left */
			mg_close_after_response(req->conn);
			http_send_error(req, 400, "invalid: malformed request body");
		} else {
			http_send_timeout(req);
		}
		return false;
	}
	req->body = comb_buf_detach(&b, &req->body_len);
	if (!req->body) {
		http_send_error(req, 503, "error: out of memory");
		return false;
	}
	return true;
}

/* Verifies the request's NIP-98 token into req->pubkey and
 * req->replay_token; answers 401 and returns false when it is not valid.
 * Its use is recorded by the route (http_claim_replay). */
static bool authenticate(struct request *req)
{
	char path[2048], token_id[65], reason[160], msg[200];
	struct comb_nip98_request nr;
	int64_t created_at;
	const char *query = req->info->query_string;
	const char *raw = req->info->local_uri_raw ? req->info->local_uri_raw
						   : req->info->local_uri;

	snprintf(path, sizeof(path), "%s%s%s", raw, query ? "?" : "",
		 query ? query : "");
	nr = (struct comb_nip98_request){
		.authorization = mg_get_header(req->conn, "Authorization"),
		.method = req->info->request_method,
		.host = req->host_header,
		.path_and_query = path,
		.body = req->body,
		.body_len = req->body_len,
		.now = (int64_t)time(NULL),
	};
	if (comb_nip98_verify(&nr, req->pubkey, token_id, &created_at, reason,
			      sizeof(reason))) {
		snprintf(msg, sizeof(msg), "auth-required: %s", reason);
		http_send_error(req, 401, msg);
		return false;
	}
	/* remembered while any node whose clock trails could still accept
	 * it; recorded by the route (http_claim_replay) */
	snprintf(req->replay_token, sizeof(req->replay_token), "%s", token_id);
	req->replay_expires = created_at + COMB_NIP98_MAX_SKEW + COMB_NIP98_CLOCK_MARGIN;
	return true;
}

/* PROTOCOL.md section 10 "Browsers": a CORS preflight is answered on every
 * path and host, before any community lookup or authorization. */
static void send_preflight(struct request *req)
{
	req->status = 204;
	mg_printf(req->conn,
		  "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n"
		  "Access-Control-Allow-Origin: *\r\n"
		  "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
		  "Access-Control-Allow-Headers: Authorization, Content-Type, Accept\r\n"
		  "Access-Control-Max-Age: 86400\r\n\r\n");
}

static void dispatch(struct request *req)
{
	int rc;

	if (!strcmp(req->info->request_method, "OPTIONS")) {
		send_preflight(req);
		return;
	}

	switch (req->route) {
	case ROUTE_HEALTHZ:
		handle_healthz(req);
		return;
	case ROUTE_READYZ:
		handle_readyz(req);
		return;
	case ROUTE_METRICS:
		handle_metrics(req);
		return;
	default:
		break;
	}
	/* The database is borrowed for the host lookup only (unless a recent
	 * lookup answers): nothing is held while the client sends its body. */
	rc = 0;
	if (!community_cached(req->host, &req->community)) {
		if (!http_acquire_db(req))
			return;
		rc = community_lookup(req->db, req->host, &req->community);
		if (rc == COMB_EUNAVAIL)
			req->db_broken = comb_db_conn_lost(req->db);
		http_release_db(req);
	}
	if (rc == COMB_EUNAVAIL) {
		http_send_unavailable(req, "database");
		return;
	}
	if (rc) {
		http_send_error(req, 404, "unknown community");
		return;
	}
	if (req->route == ROUTE_NIP11) {
		handle_nip11(req);
		return;
	}
	if (req->route == ROUTE_OTHER) {
		http_send_error(req, 404, "not found");
		return;
	}
	/* /query records the token's use itself: an incremental read does
	 * it in the call that admits it; reads borrow their connection where
	 * the read router says (http_borrow_read), writes the primary's */
	if (!read_body(req) || !authenticate(req) ||
	    (req->route != ROUTE_QUERY && !http_claim_replay(req)) ||
	    (req->route == ROUTE_EVENTS && !http_acquire_db(req)))
		return;
	if (req->route == ROUTE_EVENTS)
		handle_events(req);
	else
		handle_query(req, req->route == ROUTE_COUNT);
}

int http_handler(struct mg_connection *conn, void *cbdata)
{
	struct request req = {
		.relay = cbdata,
		.conn = conn,
		.info = mg_get_request_info(conn),
	};
	struct timespec t1;
	double seconds;

	clock_gettime(CLOCK_MONOTONIC, &req.start);
	req.route = find_route(req.info);
	parse_host(&req);
	dispatch(&req);
	http_release_db(&req);
	free(req.body);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seconds = (double)(t1.tv_sec - req.start.tv_sec) +
		  (double)(t1.tv_nsec - req.start.tv_nsec) / 1e9;
	metrics_observe(req.route, req.status, seconds);
	if (req.relay->cfg.access_log) {
		char addr[COMB_NETADDR_TEXT];

		client_addr_of(conn, addr, sizeof(addr));
		comb_info("access: %s %s %s %d %.1f ms", addr,
			  req.info->request_method,
			  req.info->local_uri ? req.info->local_uri : "-",
			  req.status ? req.status : 500, seconds * 1000);
	}
	return req.status ? req.status : 500;
}
