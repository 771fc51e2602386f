/*
 * The HTTP answerer of incremental reads: POST /query with an
 * "incremental" filter, answered from the page incremental.c read. A page
 * of at most READ_SMALL_ANSWER items goes out whole, with a length; a
 * larger one in chunks as it is written, so that the answer holds one
 * batch of bytes and one chunk, never a database connection, while the
 * client reads. (The other answerer writes CHANGES frames: sync/resume.c.)
 */
#include <stdio.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/error.h"
#include "comb/log.h"
#include "comb/random.h"
#include "metrics/metrics.h"
#include "read.h"
#include "read_int.h"
#include "request/request.h"

/* Sends an error in its shape: {"error": code, "message": ...} for
 * PROTOCOL.md section 8's codes, else (code "") {"error": message}. */
static void send_error(struct request *req, int status, const char *code,
		       const char *message)
{
	struct comb_buf b;
	char headers[64] = "";

	if (!code[0]) {
		http_send_error(req, status, message);
		return;
	}
	comb_buf_init(&b, 1024);
	comb_buf_printf(&b, "{\"error\":\"%s\",\"message\":", code);
	comb_buf_json_string(&b, message, strlen(message));
	comb_buf_putc(&b, '}');
	if (status == 503)
		snprintf(headers, sizeof(headers), "Retry-After: %d\r\n",
			 1 + (int)comb_random_below(5));
	http_send_json(req, status, b.data ? b.data : "{}", headers);
	comb_buf_release(&b);
}

/* page_flush_fn: one chunk of a streamed answer to the client. */
static int send_chunk(void *ctx, struct comb_buf *out)
{
	int err = http_stream_write(ctx, out->data, out->len);

	comb_buf_reset(out);
	return err;
}

void incremental_read(struct request *req, json_t *filter)
{
	struct incremental_ask ask = {
		.relay = req->relay, .community = &req->community, .pubkey = req->pubkey,
		.filter = filter, .kind = INCREMENTAL_HTTP,
		.replay_token = req->replay_token, .replay_expires = req->replay_expires,
	};
	struct incremental_page page = {0};
	struct comb_buf out;
	bool streaming;
	char why[128] = "";
	int err;

	http_release_db(req);  /* the read borrows its own */
	incremental_read_page(&ask, &page);
	req->replay_token[0] = '\0';  /* recorded by the read's admission */
	if (page.status != 200) {
		send_error(req, page.status, page.code, page.message);
		incremental_page_release(&page);
		return;
	}
	streaming = page.nitems > READ_SMALL_ANSWER;
	comb_buf_init(&out, 64u << 20);
	if (streaming)
		http_stream_begin(req);
	err = incremental_page_write(req->relay, &page, &out, READ_CHUNK_BYTES,
				     streaming ? send_chunk : NULL, req, why, sizeof(why));
	if (streaming) {
		/* should the bytes fail after the answer began, it is cut short */
		if (err && err != COMB_EIO)
			comb_warn("incremental read cut short: %s", why);
		http_stream_end(req, !err);
	} else if (!err) {
		http_send_json(req, 200, out.data, "");
	} else if (!strcmp(why, "error: query budget exceeded")) {
		metrics_incremental("incremental_busy");
		send_error(req, 503, "incremental_busy", "query budget exceeded");
	} else {
		http_send_error(req, 503, why);
	}
	comb_buf_release(&out);
	incremental_page_release(&page);
}
