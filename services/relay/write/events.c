/*
 * POST /events and the kind dispatch of the write path (PROTOCOL.md
 * section 3): the body is parsed and verified here, then handed to the
 * handler of its kind.
 */
#include <stdio.h>
#include <string.h>

#include "comb/buf.h"
#include "comb/db.h"
#include "comb/event.h"
#include "comb/hex.h"
#include "comb/json.h"
#include "feed/feed.h"
#include "metrics/metrics.h"
#include "rate_limit_int.h"
#include "request/request.h"
#include "write.h"
#include "write_int.h"

bool write_admit(struct writer *w, const struct comb_event *ev,
		 struct write_result *out)
{
	out->status = 200;
	out->message[0] = '\0';
	if (strcmp(ev->pubkey, w->auth_pubkey)) {
		write_refuse(out, 403, "restricted: event author is not the authenticated user");
		return false;
	}
	return rate_limit_allow_write(w, out);
}

bool write_runs_alone(const struct comb_event *ev)
{
	const char *op;

	if (ev->kind == 9)
		return false;
	if (ev->kind != 45010)
		return true;
	op = comb_event_tag_value(ev, "op");
	return op && !strcmp(op, "move");
}

bool write_joins_run(const struct comb_event *first,
		     const struct comb_event *next)
{
	return first->kind == next->kind &&
	       (next->kind == 9 || next->kind == 45010) &&
	       !write_runs_alone(first) && !write_runs_alone(next);
}

int write_run(struct writer *w, struct write_item *items, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		items[i].out->status = 200;
		items[i].out->message[0] = '\0';
		items[i].live = NULL;
	}
	rc = items[0].ev->kind == 9 ? write_chat_run(w, items, n) :
				      write_artifact_run(w, items, n);

	if (rc == 0)
		return 0;
	if (comb_db_conn_lost(w->db))
		w->db_broken = true;
	else
		write_exec(w, "ROLLBACK");
	return rc;
}

void write_dispatch(struct writer *w, const struct comb_event *ev,
		    struct write_result *out)
{
	out->status = 200;
	out->message[0] = '\0';
	switch (ev->kind) {
	case 9:
		write_chat(w, ev, out);
		return;
	case 5:
		write_deletion(w, ev, out);
		return;
	case 9000: case 9001: case 9002: case 9005:
	case 9007: case 9008: case 9021: case 9022:
		write_moderation(w, ev, out);
		return;
	case 45010:
		write_artifact(w, ev, out);
		return;
	case 45011:
		write_refuse(out, 400, "invalid: removal markers are relay-signed");
		return;
	default:
		break;
	}
	if (ev->kind >= 20000 && ev->kind < 30000) {
		write_ephemeral(w, ev, out);
		return;
	}
	write_refuse(out, 400, "invalid: unsupported kind");
}

/* Live delivery learns of every event the write committed. */
void write_event(struct writer *w, const struct comb_event *ev,
		 struct write_result *out)
{
	feed_local_begin();
	if (write_admit(w, ev, out))
		write_dispatch(w, ev, out);
	feed_local_end(w->community, ev, out->status == 200);
	metrics_write(out->message);
}

static void send_result(struct request *req, const char *id,
			const struct write_result *res)
{
	char retry[48];
	struct comb_buf b;

	comb_buf_init(&b, 4096);
	comb_buf_puts(&b, "{\"id\":");
	comb_buf_json_string(&b, id, strlen(id));
	comb_buf_printf(&b, ",\"accepted\":%s,\"message\":",
			res->status == 200 ? "true" : "false");
	comb_buf_json_string(&b, res->message, strlen(res->message));
	comb_buf_putc(&b, '}');
	snprintf(retry, sizeof(retry), "Retry-After: %d\r\n",
		 res->status == 429 ? rate_limit_retry_after(&req->relay->cfg) : 1);
	http_send_json(req, res->status, b.data ? b.data : "{}",
		       res->status == 503 || res->status == 429 ? retry : "");
	comb_buf_release(&b);
}

/*
 * True when a body that comb_event_parse refused still parsed as an event:
 * a JSON object of exactly the NIP-01 fields with a 64-hex id, refused for a
 * limit of its content (too many tags, NUL in a tag). Its answer then takes
 * the {"id","accepted","message"} shape (PROTOCOL.md section 10); id is
 * set to the event's id.
 */
static bool event_shaped(const struct request *req, char id[65])
{
	static const char *const fields[] = {
		"id", "pubkey", "created_at", "kind", "tags", "content", "sig",
	};
	char err[64];
	json_t *doc = comb_json_parse(req->body, req->body_len,
				      (size_t)req->relay->cfg.max_message_length,
				      err, sizeof(err));
	const char *value;
	bool shaped = json_is_object(doc) &&
		      json_object_size(doc) == sizeof(fields) / sizeof(fields[0]);
	size_t i;

	for (i = 0; shaped && i < sizeof(fields) / sizeof(fields[0]); i++)
		shaped = json_object_get(doc, fields[i]) != NULL;
	value = shaped ? json_string_value(json_object_get(doc, "id")) : NULL;
	shaped = value && strlen(value) == 64 && comb_hex_is_lower(value, 64);
	if (shaped)
		memcpy(id, value, 65);
	json_decref(doc);
	return shaped;
}

void handle_events(struct request *req)
{
	struct writer w = {
		.relay = req->relay,
		.db = req->db,
		.community = &req->community,
		.auth_pubkey = req->pubkey,
	};
	struct write_result res = {0};
	struct comb_event ev;
	char err[256], msg[300];

	if (comb_event_parse(&ev, req->body, req->body_len,
			     (size_t)req->relay->cfg.max_message_length,
			     err, sizeof(err))) {
		char id[65];

		if (event_shaped(req, id)) {
			write_refuse(&res, 400, "invalid: %s", err);
			send_result(req, id, &res);
			return;
		}
		snprintf(msg, sizeof(msg), "invalid: %s", err);
		http_send_error(req, 400, msg);
		return;
	}
	if (comb_event_verify(&ev, err, sizeof(err))) {
		write_refuse(&res, 400, "invalid: %s", err);
	} else {
		write_event(&w, &ev, &res);
		req->db_broken = w.db_broken;
		if (res.status == 200 && !w.db_broken)
			write_note_position(req->relay, req->db, &req->community,
					    (const char *const[]){req->pubkey}, 1);
	}
	send_result(req, ev.id, &res);
	comb_event_release(&ev);
}
