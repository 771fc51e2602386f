/*
 * POST /events and the kind dispatch of the write path (PROTOCOL.md
 * section 3): the body is parsed and verified here, then handed to the
 * handler of its kind.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "artifact.h"
#include "comb/db.h"
#include "comb/error.h"
#include "comb/log.h"
#include "http.h"
#include "rate_limit.h"
#include "writer.h"
#include "ws_live.h"

void write_refuse(struct write_result *out, int status, const char *fmt, ...)
{
	va_list ap;

	out->status = status;
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	va_end(ap);
}

void write_db_failed(struct writer *w, struct write_result *out)
{
	if (comb_db_conn_lost(w->db)) {
		w->db_broken = true;
	} else if (PQtransactionStatus(w->db) != PQTRANS_IDLE) {
		PQclear(PQexec(w->db, "ROLLBACK"));
	}
	write_refuse(out, 503, "error: database unavailable");
}

bool write_is_fresh(const struct writer *w, const struct comb_event *ev)
{
	int64_t now = (int64_t)time(NULL);

	return ev->created_at >= now - w->relay->cfg.created_at_lower_limit &&
	       ev->created_at <= now + w->relay->cfg.created_at_upper_limit;
}

bool write_exec(struct writer *w, const char *sql)
{
	PGresult *res = PQexec(w->db, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		comb_warn("statement failed: %s", PQresultErrorMessage(res));
	PQclear(res);
	return ok;
}

int write_store_event(struct writer *w, const struct comb_event *ev,
		      const char *channel_id, bool *inserted)
{
	static struct comb_db_stmt store = COMB_DB_STMT(
		"SELECT seq, inserted FROM comb_store_event($1, $2, $3, $4, $5,"
		" $6::uuid, $7, $8::json)", 8);
	char created_at[24], kind[16];
	char *tags = NULL;
	struct comb_buf raw;
	PGresult *res;
	int rc = 0;

	*inserted = false;
	comb_buf_init(&raw, 4 * (size_t)w->relay->cfg.max_message_length + 4096);
	tags = json_dumps(ev->tags, JSON_COMPACT);
	if (!tags || comb_event_to_json(ev, &raw)) {
		rc = COMB_ENOMEM;
		goto out;
	}
	snprintf(created_at, sizeof(created_at), "%lld", (long long)ev->created_at);
	snprintf(kind, sizeof(kind), "%d", ev->kind);
	res = comb_db_exec_stmt(w->relay->db, w->db, &store,
		(const char *const[]){w->community->id_text, ev->id, ev->pubkey,
				      created_at, kind, channel_id, raw.data,
				      tags});
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		comb_warn("storing event failed: %s", PQresultErrorMessage(res));
		rc = COMB_EUNAVAIL;
	} else {
		*inserted = PQgetvalue(res, 0, 1)[0] == 't';
	}
	PQclear(res);
	if (rc == 0 && *inserted)
		ws_live_local_stored(w->community, ev, channel_id);
out:
	free(tags);
	comb_buf_release(&raw);
	return rc;
}

/* The kind dispatch of write_event. */
static void write_event_kind(struct writer *w, const struct comb_event *ev,
			     struct write_result *out)
{
	out->status = 200;
	out->message[0] = '\0';
	if (strcmp(ev->pubkey, w->auth_pubkey)) {
		write_refuse(out, 403, "restricted: event author is not the authenticated user");
		return;
	}
	if (!rate_limit_allow_write(w, out))
		return;
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
	ws_live_local_begin();
	write_event_kind(w, ev, out);
	ws_live_local_end(w->community, ev, out->status == 200);
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
		snprintf(msg, sizeof(msg), "invalid: %s", err);
		http_send_error(req, 400, msg);
		return;
	}
	if (comb_event_verify(&ev, err, sizeof(err))) {
		write_refuse(&res, 400, "invalid: %s", err);
	} else {
		write_event(&w, &ev, &res);
		req->db_broken = w.db_broken;
	}
	send_result(req, ev.id, &res);
	comb_event_release(&ev);
}
