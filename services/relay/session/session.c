/*
 * One WebSocket connection's state (see session.h): creating and freeing
 * it, the NIP-01 frame builders, the AUTH challenge, the reader and its
 * read keys. Its subscriptions are sub.c's; the messages are handled in
 * ws/ws_message.c.
 */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "access/access.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/hex.h"
#include "comb/log.h"
#include "hub/hub.h"
#include "metrics/metrics.h"

/* Frames other than EVENT are small; this bounds them. */
#define SMALL_FRAME 4096

struct ws_session *ws_session_new(struct relay *relay,
				  const struct community *c,
				  const char *host_header,
				  const struct ws_transport *transport)
{
	struct ws_session *s = calloc(1, sizeof(*s));
	struct ws_outbox_limits limits;
	unsigned char nonce[32];
	size_t got = 0;
	ssize_t n;

	if (!s)
		return NULL;
	ws_outbox_default_limits(&limits);
	s->outbox = ws_outbox_new(transport, &limits);
	if (!s->outbox) {
		free(s);
		return NULL;
	}
	while (got < sizeof(nonce)) {
		n = getrandom(nonce + got, sizeof(nonce) - got, 0);
		if (n <= 0) {
			comb_error("websocket: no randomness for the auth challenge");
			ws_outbox_free(s->outbox);
			free(s);
			return NULL;
		}
		got += (size_t)n;
	}
	comb_hex_encode(nonce, sizeof(nonce), s->challenge);
	s->relay = relay;
	ws_session_budget_init(s);
	s->community = *c;
	snprintf(s->host_header, sizeof(s->host_header), "%s", host_header);
	clock_gettime(CLOCK_MONOTONIC, &s->connected_at);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->writes_done, NULL);
	return s;
}

void ws_session_free(struct ws_session *s)
{
	if (!s)
		return;
	while (s->subs)
		ws_session_drop_sub(s, s->subs);
	/* Writes in flight answer through this session: wait for them. */
	pthread_mutex_lock(&s->mu);
	while (s->writes_in_flight > 0)
		pthread_cond_wait(&s->writes_done, &s->mu);
	pthread_mutex_unlock(&s->mu);
	ws_outbox_free(s->outbox);
	if (s->authenticated)
		hub_remove_reader(&s->access);
	pthread_cond_destroy(&s->writes_done);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

bool ws_session_authenticated(struct ws_session *s)
{
	bool a;

	pthread_mutex_lock(&s->mu);
	a = s->authenticated;
	pthread_mutex_unlock(&s->mu);
	return a;
}

/* ------------------------------------------------------------------ */
/* writes in flight */

/* Outbox bytes one in-flight write's OK may need: the frame (an id and a
 * message of at most 512 bytes, JSON-escaped) and its queue cost. */
#define OK_FRAME_BYTES (SMALL_FRAME / 2)

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

void ws_session_write_end(struct ws_session *s)
{
	pthread_mutex_lock(&s->mu);
	s->writes_in_flight--;
	pthread_cond_broadcast(&s->writes_done);
	pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ */
/* frames */

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

	comb_buf_init(&b, SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"NOTICE\",");
	if (rc == 0)
		rc = json_str(&b, message);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, flags);
}

int ws_send_ok(struct ws_session *s, const char *event_id, bool accepted,
	       const char *message, unsigned flags)
{
	struct comb_buf b;
	int rc;

	comb_buf_init(&b, SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"OK\",");
	if (rc == 0)
		rc = json_str(&b, event_id);
	if (rc == 0)
		rc = comb_buf_printf(&b, ",%s,", accepted ? "true" : "false");
	if (rc == 0)
		rc = json_str(&b, message);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, flags);
}

int ws_send_closed(struct ws_session *s, const char *sub_id,
		   const char *message, unsigned flags)
{
	struct comb_buf b;
	int rc;

	metrics_closed(message);
	comb_buf_init(&b, SMALL_FRAME);
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

	comb_buf_init(&b, SMALL_FRAME);
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

int ws_event_batch_flush(struct ws_event_batch *b, char *why, size_t whylen)
{
	struct iovec payloads[WS_OUTBOX_MAX_BATCH];
	size_t i, start = 0;
	int rc;

	if (b->n == 0)
		return 0;
	for (i = 0; i < b->n; i++) {
		payloads[i].iov_base = b->frames.data + start;
		payloads[i].iov_len = b->ends[i] - start;
		start = b->ends[i];
	}
	rc = ws_outbox_push_many(b->s->outbox, WS_OP_TEXT, payloads, b->n, b->flags);
	b->n = 0;
	comb_buf_reset(&b->frames);
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

int ws_session_start(struct ws_session *s)
{
	struct comb_buf b;
	int rc;

	comb_buf_init(&b, SMALL_FRAME);
	rc = comb_buf_puts(&b, "[\"AUTH\",");
	if (rc == 0)
		rc = json_str(&b, s->challenge);
	if (rc == 0)
		rc = comb_buf_putc(&b, ']');
	return push(s, &b, rc, WS_PUSH_WAIT);
}

int ws_session_set_reader(struct ws_session *s, const char *pubkey)
{
	int rc;

	reader_access_init(&s->access, s->relay, s->community.id, pubkey);
	/* Registered before the status is read, so that no change of it is
	 * missed in between (hub_load_admin). */
	rc = hub_add_reader(&s->access);
	if (!rc)
		rc = hub_load_admin(s->relay, &s->community, &s->access, NULL);
	if (rc) {
		hub_remove_reader(&s->access);
		return rc == COMB_ENOMEM ? COMB_EUNAVAIL : rc;
	}
	pthread_mutex_lock(&s->mu);
	memcpy(s->pubkey, pubkey, sizeof(s->pubkey));
	s->authenticated = true;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int ws_session_access_now(struct ws_session *s, comb_lsn *primary_at)
{
	return hub_load_admin(s->relay, &s->community, &s->access, primary_at);
}
