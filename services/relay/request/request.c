/*
 * The answers every route handler sends (request.h): JSON bodies with the
 * status line and CORS header, the {"error": ...} shape, the database
 * connection a request borrows, and the record of its NIP-98 token's use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/random.h"
#include "comb/replay.h"
#include "readpos/readpos.h"
#include "request.h"

static const char *status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 429: return "Too Many Requests";
	case 503: return "Service Unavailable";
	default: return "Internal Server Error";
	}
}

void http_send_json(struct request *req, int status, const char *json,
		    const char *extra_headers)
{
	size_t len = strlen(json);

	/* No database connection waits while the client reads. */
	http_release_db(req);
	req->status = status;
	mg_printf(req->conn,
		  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
		  "Content-Length: %zu\r\nAccess-Control-Allow-Origin: *\r\n%s\r\n",
		  status, status_text(status), len, extra_headers);
	mg_write(req->conn, json, len);
}

void http_send_error(struct request *req, int status, const char *message)
{
	struct comb_buf b;
	char retry[64];

	comb_buf_init(&b, 4096);
	comb_buf_puts(&b, "{\"error\":");
	comb_buf_json_string(&b, message, strlen(message));
	comb_buf_putc(&b, '}');
	snprintf(retry, sizeof(retry), "Retry-After: %d\r\n",
		 1 + (int)comb_random_below(3));
	http_send_json(req, status, b.data ? b.data : "{}",
		       status == 503 || status == 429 ? retry : "");
	comb_buf_release(&b);
}

void http_send_unavailable(struct request *req, const char *what)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "error: %s unavailable", what);
	http_send_error(req, 503, msg);
}

void http_send_timeout(struct request *req)
{
	static const char body[] = "{\"error\":\"invalid: request body too slow\"}";

	http_release_db(req);
	mg_close_after_response(req->conn);
	req->status = 408;
	mg_printf(req->conn,
		  "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
		  "Content-Length: %zu\r\nConnection: close\r\n"
		  "Access-Control-Allow-Origin: *\r\n\r\n%s", sizeof(body) - 1, body);
}

void http_stream_begin(struct request *req)
{
	http_release_db(req);
	req->status = 200;
	mg_printf(req->conn,
		  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		  "Transfer-Encoding: chunked\r\n"
		  "Access-Control-Allow-Origin: *\r\n\r\n");
}

int http_stream_write(struct request *req, const char *data, size_t len)
{
	char head[24];
	size_t hlen, total;
	char *chunk;
	int written;

	if (len == 0)
		return 0;  /* an empty chunk would end the answer */
	/* One write for the chunk's size line, bytes and CRLF: three (as
	 * mg_send_chunk does) cost the client two more tiny segments. */
	hlen = (size_t)snprintf(head, sizeof(head), "%zx\r\n", len);
	total = hlen + len + 2;
	chunk = malloc(total);
	if (!chunk)
		return COMB_ENOMEM;
	memcpy(chunk, head, hlen);
	memcpy(chunk + hlen, data, len);
	memcpy(chunk + hlen + len, "\r\n", 2);
	written = mg_write(req->conn, chunk, total);
	free(chunk);
	return written == (int)total ? 0 : COMB_EIO;
}

void http_stream_end(struct request *req, bool complete)
{
	if (complete)
		mg_send_chunk(req->conn, "", 0);
	else
		mg_close_after_response(req->conn);
}

void http_release_db(struct request *req)
{
	if (!req->db)
		return;
	bool broken = req->db_broken || comb_db_conn_lost(req->db);

	if (req->read.conn)
		comb_read_release(req->relay->reads, &req->read, broken);
	else
		comb_db_release(req->relay->db, req->db, broken);
	req->db = NULL;
	req->db_broken = false;
}

bool http_borrow_read(struct request *req, comb_lsn at_least)
{
	comb_lsn need = at_least > req->read_at_least ? at_least : req->read_at_least;

	http_release_db(req);
	if (readpos_borrow(req->relay, &req->community,
			   req->pubkey[0] ? req->pubkey : NULL, need, 2000,
			   &req->read)) {
		http_send_unavailable(req, "database");
		return false;
	}
	req->db = req->read.conn;
	return true;
}

bool http_read_failed_over(struct request *req, const PGresult *res)
{
	bool lost;

	if (!req->read.conn || req->read_retry || !readpos_failed_over(&req->read, res, &lost))
		return false;
	req->db_broken = lost;
	http_release_db(req);
	req->read_retry = true;
	req->read_at_least = COMB_READ_PRIMARY;
	return true;
}

struct comb_db_pool *request_pool(const struct request *req)
{
	return req->read.conn ? req->read.pool : req->relay->db;
}

bool http_acquire_db(struct request *req)
{
	if (req->db)
		return true;
	req->db = comb_db_acquire(req->relay->db, 2000);
	if (!req->db) {
		http_send_unavailable(req, "database");
		return false;
	}
	return true;
}

void http_refuse_replay(struct request *req, int rc)
{
	if (rc == COMB_EREPLAY)
		http_send_error(req, 401, "auth-required: authorization already used");
	else
		http_send_unavailable(req, "replay store");
}

bool http_claim_replay(struct request *req)
{
	int rc;

	if (!req->replay_token[0])
		return true;
	rc = comb_replay_claim(req->relay->redis, req->replay_token,
			       req->replay_expires);
	req->replay_token[0] = '\0';
	if (rc)
		http_refuse_replay(req, rc);
	return rc == 0;
}
