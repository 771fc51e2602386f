/*
 * The NIP-01 messages of a WebSocket connection (see ws_int.h): the
 * dispatch by type, NIP-42 AUTH and EVENT. REQ and CLOSE are in
 * ws_req.c, the connection's state and frames in session/.
 *
 * EVENT goes through write_event(), the write path POST /events uses, so
 * both answer with the same accepted flag and message.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comb/error.h"
#include "comb/event.h"
#include "comb/hex.h"
#include "comb/json.h"
#include "comb/nip42.h"
#include "session/session.h"
#include "write/write.h"
#include "ws_int.h"

/* The id of an event object as far as it can be answered with: 64
 * lowercase hex digits, else NULL. */
static const char *answerable_id(const json_t *obj)
{
	const char *id = comb_json_get_string(obj, "id");

	return id && comb_hex_is_lower(id, 64) ? id : NULL;
}

/* Answers a refused EVENT or AUTH with OK false when it has an id, else
 * with a NOTICE. */
static void refuse(struct ws_session *s, const json_t *obj, const char *message)
{
	const char *id = answerable_id(obj);

	if (id)
		ws_send_ok(s, id, false, message, WS_PUSH_WAIT);
	else
		ws_send_notice(s, message, WS_PUSH_WAIT);
}

/* ["AUTH", <kind-22242 event>] */
static void on_auth(struct ws_session *s, const json_t *msg)
{
	const json_t *obj = json_array_get(msg, 1);
	char err[160], text[200];
	struct comb_event ev;
	bool already, same;

	if (json_array_size(msg) != 2 || !json_is_object(obj)) {
		ws_send_notice(s, "invalid: AUTH takes one event", WS_PUSH_WAIT);
		return;
	}
	if (comb_event_from_json(&ev, obj, err, sizeof(err))) {
		snprintf(text, sizeof(text), "auth-required: invalid event: %s", err);
		refuse(s, obj, text);
		return;
	}
	if (comb_nip42_verify(&ev, s->challenge, s->host_header,
			      (int64_t)time(NULL), err, sizeof(err))) {
		snprintf(text, sizeof(text), "auth-required: %s", err);
		ws_send_ok(s, ev.id, false, text, WS_PUSH_WAIT);
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	already = s->authenticated;
	same = already && !strcmp(s->pubkey, ev.pubkey);
	pthread_mutex_unlock(&s->mu);
	if (already) {
		ws_send_ok(s, ev.id, same, same ? "" :
			   "restricted: this connection is authenticated as another key",
			   WS_PUSH_WAIT);
		goto out;
	}
	if (ws_session_set_reader(s, ev.pubkey)) {
		ws_send_ok(s, ev.id, false, "error: database unavailable", WS_PUSH_WAIT);
		goto out;
	}
	ws_send_ok(s, ev.id, true, "", WS_PUSH_WAIT);
out:
	comb_event_release(&ev);
}

/* The write path's answer to one pipelined EVENT, on a batcher thread
 * after the write's transaction ended; the OKs of one batch's writes leave
 * together (more). */
static void event_done(void *ctx, const struct comb_event *ev,
		       const struct write_result *res, bool more)
{
	struct ws_session *s = ctx;

	if (ws_session_write_answer(s, ev->id, res->status == 200, res->message,
				    more) == COMB_ETOOBIG)
		ws_outbox_close(s->outbox, WS_CLOSE_POLICY, "slow consumer");
}

/* The answer to an EVENT before NIP-42. */
static const char auth_first[] =
	"auth-required: authenticate with NIP-42 before publishing";

/*
 * Publishes a well-formed EVENT of an authenticated connection whose
 * client's address is addr (what the write counts against): the event
 * is verified here, then handed to the write path without waiting for its
 * OK (pipelining): OKs come in completion order, each after its write
 * committed. At most COMB_WRITE_INFLIGHT_PER_CONNECTION wait at once;
 * beyond that this thread waits, and so stops reading the socket. The
 * answers are those of POST /events: both go through the same write path.
 */
static void publish(struct ws_session *s, const char *addr, struct comb_event *ev)
{
	char err[256], text[300];

	if (comb_event_verify(ev, err, sizeof(err))) {
		snprintf(text, sizeof(text), "invalid: %s", err);
		ws_send_ok(s, ev->id, false, text, WS_PUSH_WAIT);
	} else if (ws_session_write_begin(
			   s, s->relay->cfg.write_inflight_per_connection)) {
		write_submit(s->relay, &s->community, s->pubkey, addr, ev, s,
			     event_done, s);
	}
}

/* ["EVENT", <event>] as a JSON value from addr: checked, then published. */
static void on_event(struct ws_session *s, const char *addr, const json_t *msg)
{
	const json_t *obj = json_array_get(msg, 1);
	struct comb_event ev;
	char err[256], text[300];

	if (json_array_size(msg) != 2 || !json_is_object(obj)) {
		ws_send_notice(s, "invalid: EVENT takes one event", WS_PUSH_WAIT);
		return;
	}
	if (!ws_session_authenticated(s)) {
		refuse(s, obj, auth_first);
		return;
	}
	if (comb_event_from_json(&ev, obj, err, sizeof(err))) {
		snprintf(text, sizeof(text), "invalid: %s", err);
		refuse(s, obj, text);
		return;
	}
	publish(s, addr, &ev);
	comb_event_release(&ev);
}

/* An EVENT message read in one pass (comb_event_message_parse), answered
 * exactly as on_event would answer it. */
static void on_event_read(struct ws_session *s, const char *addr, struct comb_event *ev)
{
	if (!ws_session_authenticated(s))
		ws_send_ok(s, ev->id, false, auth_first, WS_PUSH_WAIT);
	else
		publish(s, addr, ev);
}

void ws_session_handle(struct ws_session *s, const char *addr, const char *text,
		       size_t len)
{
	char err[128], notice[200];
	struct comb_event ev;
	const char *type;
	json_t *msg;

	/* The commonest message, with the longest strings, is read in one
	 * pass; what that declines is read the general way below. */
	if (len <= (size_t)s->relay->cfg.max_message_length &&
	    comb_event_message_parse(&ev, text, len) == 0) {
		on_event_read(s, addr, &ev);
		comb_event_release(&ev);
		return;
	}
	msg = comb_json_parse(text, len, (size_t)s->relay->cfg.max_message_length,
			      err, sizeof(err));
	if (!msg) {
		snprintf(notice, sizeof(notice), "invalid: %s", err);
		ws_send_notice(s, notice, WS_PUSH_WAIT);
		return;
	}
	type = json_string_value(json_array_get(msg, 0));
	if (!json_is_array(msg) || !type) {
		ws_send_notice(s, "invalid: a message is a json array that starts with its type",
			       WS_PUSH_WAIT);
	} else if (!strcmp(type, "EVENT")) {
		on_event(s, addr, msg);
	} else if (!strcmp(type, "REQ")) {
		ws_req_open(s, msg);
	} else if (!strcmp(type, "CLOSE")) {
		ws_req_close(s, msg);
	} else if (!strcmp(type, "AUTH")) {
		on_auth(s, msg);
	} else {
		snprintf(notice, sizeof(notice), "invalid: unknown message type %.40s", type);
		ws_send_notice(s, notice, WS_PUSH_WAIT);
	}
	json_decref(msg);
}
