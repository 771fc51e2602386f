/*
 * The answers every route handler sends (request.h): JSON bodies with the
 * status line and CORS header, the {"error": ...} shape, and the database
 * connection a request borrows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comb/buf.h"
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
		 1 + (int)(random() % 3));
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
