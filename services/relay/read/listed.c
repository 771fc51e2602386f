/*
 * Answers of /query that list stored events (see read_int.h): their
 * bytes come from the revision cache, the misses read with one statement
 * a batch at a time (read_events_from). A small answer is sent whole; a
 * larger one as it is read, in a chunked answer, so neither the whole
 * result nor a database connection is held while the client reads.
 */
#include <stdlib.h>

#include "comb/error.h"
#include "comb/log.h"
#include "read.h"
#include "read_int.h"
#include "request/request.h"

/* An answer on its way (see send_whole and send_streamed). */
struct stream_out {
	struct request *req;
	struct comb_buf buf;       /* not sent yet */
	size_t events;
	bool whole;                /* sent at the end, not in chunks */
};

/* Appends one event to the answer, sending a chunk when enough gathered
 * and the answer is streamed (the emit of read_events_from). */
static int stream_event(void *ctx, const char *raw, size_t len, char *why,
			size_t whylen)
{
	struct stream_out *o = ctx;
	int err;

	if ((o->events++ && comb_buf_putc(&o->buf, ',')) ||
	    comb_buf_append(&o->buf, raw, len))
		return comb_fail(why, whylen, COMB_ENOMEM, "out of memory");
	if (o->whole || o->buf.len < READ_CHUNK_BYTES)
		return 0;
	err = http_stream_write(o->req, o->buf.data, o->buf.len);
	if (err)
		return comb_fail(why, whylen, err, err == COMB_EIO ? "the client left"
								  : "out of memory");
	comb_buf_reset(&o->buf);
	return 0;
}

/* Sends the events seqs[0..n) as a bare JSON array, as they are read. */
static void send_streamed(struct request *req, const int64_t *seqs, size_t n)
{
	struct stream_out o = {.req = req};
	struct event_source src;
	char why[160] = "out of memory";
	int rc;

	comb_buf_init(&o.buf, READ_CHUNK_BYTES +
		      4 * (size_t)req->relay->cfg.max_message_length + 4096);
	read_misses_source(req, &src);
	http_stream_begin(req);
	rc = comb_buf_putc(&o.buf, '[') ? COMB_ENOMEM : 0;
	if (rc == 0)
		rc = read_events_from(req->relay, &src, seqs, n, stream_event, &o,
				      why, sizeof(why));
	if (rc == 0)
		rc = comb_buf_putc(&o.buf, ']') ? COMB_ENOMEM : 0;
	if (rc == 0)
		rc = http_stream_write(req, o.buf.data, o.buf.len);
	if (rc && rc != COMB_EIO)
		comb_warn("a /query answer was cut short: %s", why);
	http_stream_end(req, rc == 0);
	comb_buf_release(&o.buf);
}

/* Sends the few events seqs[0..n) as a bare JSON array in one answer
 * with its length, their bytes read (the misses on the request's own
 * connection) before it is sent. */
static void send_whole(struct request *req, const int64_t *seqs, size_t n)
{
	struct stream_out o = {.req = req, .whole = true};
	char why[160] = "out of memory";
	int rc;

	comb_buf_init(&o.buf, (size_t)READ_SMALL_ANSWER *
		      (4 * (size_t)req->relay->cfg.max_message_length + 4096) + 2);
	rc = comb_buf_putc(&o.buf, '[') ? COMB_ENOMEM : 0;
	if (rc == 0)
		rc = read_events_from(req->relay,
				      &(struct event_source){request_pool(req), req->db, false, 0},
				      seqs, n, stream_event, &o, why, sizeof(why));
	if (rc == 0)
		rc = comb_buf_putc(&o.buf, ']') ? COMB_ENOMEM : 0;
	if (rc == COMB_ENOMEM) {
		http_send_error(req, 503, "error: out of memory");
	} else if (rc) {
		req->db_broken = comb_db_conn_lost(req->db);
		http_send_unavailable(req, "database");
	} else {
		http_send_json(req, 200, o.buf.data, "");
	}
	comb_buf_release(&o.buf);
}

void read_send_listed(struct request *req, const PGresult *res, bool small)
{
	size_t i, n = (size_t)PQntuples(res);
	int64_t *seqs = malloc((n + 1) * sizeof(*seqs));

	if (!seqs) {
		http_send_error(req, 503, "error: out of memory");
		return;
	}
	for (i = 0; i < n; i++)
		seqs[i] = strtoll(PQgetvalue(res, (int)i, 0), NULL, 10);
	if (small)
		send_whole(req, seqs, n);
	else
		send_streamed(req, seqs, n);
	free(seqs);
}
