/*
 * The NIP-01 frames a connection sends (see session.h): AUTH, NOTICE, OK,
 * CLOSED, EOSE and EVENT, one at a time or batched (struct
 * ws_event_batch: a subscription's EVENTs, a batch's OKs), each pushed to
 * the connection's outbox; and the EVENT path's writes in flight, which
 * those OKs answer.
 */
#include "session.h"

#include <pthread.h>
#include <string.h>

#include "comb/error.h"
#include "metrics/metrics.h"

static int push(struct ws_session *s, struct comb_buf *b, int rc, unsigned flags)
{
	if (rc == 0)
		rc = ws_outbox_push(s->outbox, WS_OP_TEXT, b->data, b->len, flags);
	comb_buf_release(b);
	return rc;
}

static int json_str(struct comb_buf *b, const char *s)
{
	return comb_buf_json_string(b, s, strlen(s));
}

int ws_send_notice(struct ws_session *s, const char *message, unsigned flags)
{
	struct comb_buf b;
	int rc;

	comb_buf_init(&b, WS_SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"NOTICE\",");
	if (rc == 0)
		rc = json_str(&b, message);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, flags);
}

/* Appends ["OK",event_id,accepted,message] to out. */
static int format_ok(struct comb_buf *out, const char *event_id, bool accepted,
		     const char *message)
{
	int rc = comb_buf_puts(out, "[\"OK\",");

	if (rc == 0)
		rc = json_str(out, event_id);
	if (rc == 0)
		rc = comb_buf_puts(out, accepted ? ",true," : ",false,");
	if (rc == 0)
		rc = json_str(out, message);
	if (rc == 0)
		rc = comb_buf_putc(out, ']');
	return rc;
}

int ws_send_ok(struct ws_session *s, const char *event_id, bool accepted,
	       const char *message, unsigned flags)
{
	struct comb_buf b;

	comb_buf_init(&b, WS_SMALL_FRAME);
	return push(s, &b, format_ok(&b, event_id, accepted, message), flags);
}

int ws_send_closed(struct ws_session *s, const char *sub_id,
		   const char *message, unsigned flags)
{
	struct comb_buf b;
	int rc;

	metrics_closed(message);
	comb_buf_init(&b, WS_SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"CLOSED\",");
	if (rc == 0)
		rc = json_str(&b, sub_id);
	if (rc == 0)
		rc = comb_buf_putc(&b, ',');
	if (rc == 0)
		rc = json_str(&b, message);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, flags);
}

/* Appends ["EOSE",sub_id] to out. */
static int format_eose(struct comb_buf *out, const char *sub_id)
{
	int rc = comb_buf_puts(out, "[\"EOSE\",");

	if (rc == 0)
		rc = json_str(out, sub_id);
	if (rc == 0)
		rc = comb_buf_putc(out, ']');
	return rc;
}

int ws_send_eose(struct ws_session *s, const char *sub_id, unsigned flags)
{
	struct comb_buf b;

	comb_buf_init(&b, WS_SMALL_FRAME);
	return push(s, &b, format_eose(&b, sub_id), flags);
}

int ws_format_event(struct comb_buf *out, const char *sub_id,
		    const char *json, size_t len)
{
	int rc = comb_buf_puts(out, "[\"EVENT\",");

	if (rc == 0)
		rc = json_str(out, sub_id);
	if (rc == 0)
		rc = comb_buf_putc(out, ',');
	if (rc == 0)
		rc = comb_buf_append(out, json, len);
	if (rc == 0)
		rc = comb_buf_putc(out, ']');
	return rc;
}

void ws_event_batch_init(struct ws_event_batch *b, struct ws_session *s,
			 const char *sub_id, unsigned flags)
{
	*b = (struct ws_event_batch){.s = s, .sub_id = sub_id, .flags = flags};
	comb_buf_init(&b->frames, 2 * WS_EVENT_BATCH_BYTES + (16u << 20));
}

/* The CLOSED message of a batch's failure rc (non-zero) into why;
 * returns COMB_ENOMEM or COMB_EIO. */
static int batch_failure(int rc, char *why, size_t whylen)
{
	if (rc == COMB_ENOMEM)
		return comb_fail(why, whylen, COMB_ENOMEM, "error: out of memory");
	return comb_fail(why, whylen, COMB_EIO, "error: connection closing");
}

/* Pushes what b holds (at least one frame) and empties it; returns what
 * the push returned. */
static int batch_push(struct ws_event_batch *b)
{
	struct iovec payloads[WS_OUTBOX_MAX_BATCH];
	size_t i, start = 0;
	int rc;

	for (i = 0; i < b->n; i++) {
		payloads[i].iov_base = b->frames.data + start;
		payloads[i].iov_len = b->ends[i] - start;
		start = b->ends[i];
	}
	rc = ws_outbox_push_many(b->s->outbox, WS_OP_TEXT, payloads, b->n, b->flags);
	b->n = 0;
	comb_buf_reset(&b->frames);
	return rc;
}

int ws_event_batch_flush(struct ws_event_batch *b, char *why, size_t whylen)
{
	int rc = b->n ? batch_push(b) : 0;

	return rc ? batch_failure(rc, why, whylen) : 0;
}

/* Ends the frame just appended to b's frames (rc: how appending it went);
 * a frame that could not be appended whole is dropped. Returns 0 or
 * COMB_ENOMEM. */
static int batch_end_frame(struct ws_event_batch *b, int rc)
{
	if (rc) {
		b->frames.len = b->n ? b->ends[b->n - 1] : 0;
		if (b->frames.data)
			b->frames.data[b->frames.len] = '\0';
		return COMB_ENOMEM;
	}
	b->ends[b->n++] = b->frames.len;
	return 0;
}

int ws_event_batch_eose(struct ws_event_batch *b, char *why, size_t whylen)
{
	int rc = batch_end_frame(b, format_eose(&b->frames, b->sub_id));

	return rc ? batch_failure(rc, why, whylen) : ws_event_batch_flush(b, why, whylen);
}

int ws_event_batch_add(void *batch, const char *json, size_t len, char *why,
		       size_t whylen)
{
	struct ws_event_batch *b = batch;
	int rc = batch_end_frame(b, ws_format_event(&b->frames, b->sub_id, json, len));

	if (rc)
		return batch_failure(rc, why, whylen);
	if (b->n == WS_OUTBOX_MAX_BATCH || b->frames.len >= WS_EVENT_BATCH_BYTES)
		return ws_event_batch_flush(b, why, whylen);
	return 0;
}

void ws_event_batch_release(struct ws_event_batch *b)
{
	comb_buf_release(&b->frames);
	b->n = 0;
}

/* The writes in flight. */

/* Outbox bytes one in-flight write's OK may need: the frame (an id and a
 * message of at most 512 bytes, JSON-escaped) and its queue cost. */
#define OK_FRAME_BYTES (WS_SMALL_FRAME / 2)

bool ws_session_write_begin(struct ws_session *s, int limit)
{
	struct ws_outbox_limits limits;
	bool room;

	ws_outbox_default_limits(&limits);
	for (;;) {
		if (ws_outbox_closed(s->outbox))
			return false;
		pthread_mutex_lock(&s->mu);
		while (s->writes_in_flight >= limit)
			pthread_cond_wait(&s->writes_done, &s->mu);
		/* Leave room for every OK in flight, so that a client that
		 * pipelines without reading stalls instead of overflowing. */
		room = ws_outbox_queued(s->outbox) +
		       (size_t)(s->writes_in_flight + 1) * OK_FRAME_BYTES <=
		       limits.max_bytes;
		if (room)
			s->writes_in_flight++;
		pthread_mutex_unlock(&s->mu);
		if (room)
			return true;
		ws_outbox_drain(s->outbox, 100);
	}
}

/* Counts n writes as answered (their OKs queued or given up). */
static void writes_end(struct ws_session *s, int n)
{
	pthread_mutex_lock(&s->mu);
	s->writes_in_flight -= n;
	pthread_cond_broadcast(&s->writes_done);
	pthread_mutex_unlock(&s->mu);
}

int ws_session_write_answer(struct ws_session *s, const char *event_id,
			    bool accepted, const char *message, bool more)
{
	struct ws_event_batch *b = &s->answers;
	int rc, answered;

	pthread_mutex_lock(&s->answers_mu);
	rc = batch_end_frame(b, format_ok(&b->frames, event_id, accepted, message));
	s->answers_writes++;
	if (rc == 0 && more && b->n < WS_OUTBOX_MAX_BATCH) {
		pthread_mutex_unlock(&s->answers_mu);
		return 0;
	}
	if (b->n) {
		int pushed = batch_push(b);

		if (rc == 0)
			rc = pushed;
	}
	if (!more)
		ws_event_batch_release(b);
	answered = s->answers_writes;
	s->answers_writes = 0;
	pthread_mutex_unlock(&s->answers_mu);
	writes_end(s, answered);
	return rc;
}

int ws_session_start(struct ws_session *s)
{
	struct comb_buf b;
	int rc;

	comb_buf_init(&b, WS_SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"AUTH\",");
	if (rc == 0)
		rc = json_str(&b, s->challenge);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, WS_PUSH_WAIT);
}

